package fault

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/waitgroup"
)

// An Add whose context, cancellable with no deadline, is cancelled while
// the server stalls fails with an error matching context.Canceled, as
// every call does once its context is cancelled, not one matching
// context.DeadlineExceeded (its context had no deadline), and within half
// a second; nothing is left added once the server answers.
func TestWaitGroupAddCancelledDuringStallMatchesCanceled(t *testing.T) {
	srv := startServer(t)
	g := waitgroup.New(newBackend(t, srv.Addr()), "stall:add", waitgroup.WithLogger(nil))
	ctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
	// Loads the scripts, so that the call during the stall runs.
	if err := g.Add(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := g.Done(ctx); err != nil {
		t.Fatal(err)
	}
	end := pauseServer(t, srv, "DEBUG SLEEP", 2*time.Second)
	timer := time.AfterFunc(100*time.Millisecond, cancel)
	defer timer.Stop()
	start := time.Now()
	err := g.Add(ctx, 1)
	took := time.Since(start)
	end()
	wait.Settle()
	if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Add cancelled during a stall: %v; want an error matching context.Canceled only", err)
	}
	if took > 100*time.Millisecond+500*time.Millisecond {
		t.Errorf("Add returned %v after its cancellation; want half a second at most", took-100*time.Millisecond)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if s, err := g.State(sctx); err != nil || s.Count != 0 {
		t.Errorf("after the stall: state %+v, %v; want nothing added", s, err)
	}
}
