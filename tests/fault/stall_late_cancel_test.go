package fault

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
)

// A cancellation well into a stall, after attempts were cut off by their
// own bound and sent again: once the server answers, what they left (a
// hold, a waiter entry) is undone, the mutex free or still its holder's,
// with no waiter queued.
func TestStallCancelledLateLeavesNothing(t *testing.T) {
	srv := startServer(t)
	for _, held := range []bool{false, true} {
		name := "stall:late:free"
		if held {
			name = "stall:late:held"
		}
		t.Run(name, func(t *testing.T) {
			holder := mutex.New(newBackend(t, srv.Addr()), name, mutex.WithLogger(nil))
			m := mutex.New(newBackend(t, srv.Addr()), name, mutex.WithLogger(nil))
			hctx := dsync.WithOwner(context.Background())
			loadScripts(t, m) // so that the attempts during the stall run
			if held {
				if err := holder.LockContext(hctx); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
			end := pauseServer(t, srv, "DEBUG SLEEP", 2*time.Second)
			timer := time.AfterFunc(1200*time.Millisecond, cancel)
			defer timer.Stop()
			err := m.LockContext(ctx)
			end()
			wait.Settle()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("LockContext cancelled late in a stall: %v; want context.Canceled", err)
			}
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			s, serr := m.State(sctx)
			if serr != nil || s.Locked != held || s.Waiters != 0 {
				t.Errorf("after the stall: state %+v, %v; want locked %v, no waiter", s, serr, held)
			}
			if held {
				holder.UnlockContext(hctx)
			}
		})
	}
}
