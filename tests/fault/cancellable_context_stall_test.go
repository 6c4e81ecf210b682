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

// A context that can be cancelled but has no deadline (a request's) bounds
// each attempt by itself, SettleGrace after it is sent (see
// wait.AttemptContext). A server that stalls past that bound fails the
// attempt with an error that may pass: LockContext waits on and acquires
// once the server answers again, as it would with context.Background(),
// and a cancellation meanwhile ends it within half a second, matching
// context.Canceled.
func TestStallCancellableContext(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())

	t.Run("WaitsThroughStall", func(t *testing.T) {
		m := mutex.New(b, "stall:cancellable:waits", mutex.WithLogger(nil))
		ctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
		defer cancel()
		end := pauseServer(t, srv, "DEBUG SLEEP", time.Second)
		start := time.Now()
		err := m.LockContext(ctx)
		took := time.Since(start)
		end()
		if err != nil {
			t.Fatalf("LockContext through a 1s stall with a live context: %v after %v; want the mutex", err, took)
		}
		if err := m.UnlockContext(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("CancelledDuringStall", func(t *testing.T) {
		m := mutex.New(b, "stall:cancellable:cancelled", mutex.WithLogger(nil))
		ctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
		end := pauseServer(t, srv, "DEBUG SLEEP", 2*time.Second)
		hb := startHeartbeat()
		timer := time.AfterFunc(100*time.Millisecond, cancel)
		defer timer.Stop()
		start := time.Now()
		err := m.LockContext(ctx)
		took := time.Since(start)
		// As TestStallDeadline counts it: less however long the process
		// went without running.
		overrun := took - 100*time.Millisecond - maxGap(hb.stop(), start, start.Add(took))
		end()
		wait.Settle()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("LockContext cancelled during a stall: %v; want an error matching context.Canceled", err)
		}
		if overrun > 500*time.Millisecond {
			t.Errorf("LockContext returned %v after its cancellation; want half a second at most", overrun)
		}
		checkFree(t, m)
	})
}
