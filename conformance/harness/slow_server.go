package harness

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
)

// SlowServer fails t unless the backends that open makes behave, with a
// context that can be cancelled but has no deadline (a request's), as
// DESIGN.md asks of every adapter when the server is slow or stalls:
//
//   - LateReplies: through a SlowProxy delaying every reply by more than
//     wait.SettleGrace (after which the portable layer's first attempt is
//     given up and the next ones are watched), a mutex's LockContext,
//     TryLockContext and UnlockContext succeed: the adapter does not cut
//     a call that its context leaves alive, nor poison a connection that
//     a cut call shared.
//   - StallThenCancel: while the server is stopped (SIGSTOP), a
//     LockContext cancelled after 200ms returns an error matching
//     context.Canceled within a second of that; once the server goes on,
//     the same backend locks and unlocks.
//
// open returns a backend connected to addr, closed when t ends.
func SlowServer(t *testing.T, open func(t *testing.T, addr string) backend.Backend) {
	t.Helper()
	srv := Standalone(t)
	// liveCtx is a context that can be cancelled and has no deadline;
	// the timer is the test's bound, not a deadline the adapter sees.
	liveCtx := func(t *testing.T, bound time.Duration) context.Context {
		ctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
		stop := time.AfterFunc(bound, cancel)
		t.Cleanup(func() { stop.Stop(); cancel() })
		return ctx
	}

	t.Run("LateReplies", func(t *testing.T) {
		px := NewSlowProxy(t, srv.Addr())
		b := open(t, px.Addr())
		name := "slow:" + dsync.NewID()[:8]
		m := mutex.New(b, name, mutex.WithLogger(nil))
		warm := liveCtx(t, 5*time.Second)
		if err := m.LockContext(warm); err != nil {
			t.Fatalf("LockContext with no latency: %v", err)
		}
		if err := m.UnlockContext(warm); err != nil {
			t.Fatalf("UnlockContext with no latency: %v", err)
		}

		late := wait.SettleGrace + 100*time.Millisecond
		px.SetLatency(late)
		defer px.SetLatency(0)
		ctx := liveCtx(t, 8*time.Second)
		start := time.Now()
		if err := m.LockContext(ctx); err != nil {
			t.Fatalf("LockContext with every reply %v late and a live context: %v after %v; want success", late, err, time.Since(start).Round(time.Millisecond))
		}
		if err := m.UnlockContext(ctx); err != nil {
			t.Fatalf("UnlockContext with every reply %v late: %v", late, err)
		}
		ok, err := mutex.New(b, name, mutex.WithLogger(nil)).TryLockContext(ctx)
		if err != nil || !ok {
			t.Fatalf("TryLockContext of a free mutex with every reply %v late = %v, %v; want true", late, ok, err)
		}
		if err := m.UnlockContext(ctx); err != nil {
			t.Fatalf("UnlockContext after TryLockContext: %v", err)
		}
	})

	t.Run("StallThenCancel", func(t *testing.T) {
		b := open(t, srv.Addr())
		name := "stall:" + dsync.NewID()[:8]
		m := mutex.New(b, name, mutex.WithLogger(nil))
		warm := liveCtx(t, 5*time.Second)
		if err := m.LockContext(warm); err != nil {
			t.Fatal(err)
		}
		if err := m.UnlockContext(warm); err != nil {
			t.Fatal(err)
		}

		node := srv.Node()
		if err := node.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				if err := node.Signal(syscall.SIGCONT); err != nil {
					t.Error(err)
				}
			}
		}
		defer resume()
		ctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
		defer cancel()
		const after = 200 * time.Millisecond
		stop := time.AfterFunc(after, cancel)
		defer stop.Stop()
		start := time.Now()
		err := m.LockContext(ctx)
		took := time.Since(start)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("LockContext on a stalled server, cancelled after %v = %v; want an error matching context.Canceled", after, err)
		}
		if took > after+time.Second {
			t.Fatalf("LockContext returned %v after its cancellation; want within 1s", took-after)
		}

		resume()
		ctx2 := liveCtx(t, 5*time.Second)
		m2 := mutex.New(b, name, mutex.WithLogger(nil))
		if err := m2.LockContext(ctx2); err != nil {
			t.Fatalf("LockContext after the server went on: %v", err)
		}
		if err := m2.UnlockContext(ctx2); err != nil {
			t.Fatalf("UnlockContext after the server went on: %v", err)
		}
	})
}
