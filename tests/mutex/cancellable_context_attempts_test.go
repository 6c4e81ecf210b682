package mutex_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// attemptContexts records the contexts of a backend's script calls: whether
// each could be cancelled, and how long its deadline left it.
type attemptContexts struct {
	backend.Backend
	mu          sync.Mutex
	cancellable int
	unbounded   int
	longest     time.Duration
	calls       int
}

func (a *attemptContexts) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	a.mu.Lock()
	a.calls++
	if ctx.Done() != nil {
		a.cancellable++
	}
	if d, ok := ctx.Deadline(); !ok {
		a.unbounded++
	} else {
		a.longest = max(a.longest, time.Until(d))
	}
	a.mu.Unlock()
	return a.Backend.Eval(ctx, s, keys, args...)
}

// TestCancellableContextAttemptsNeedNoGoroutine: a waiter whose context can
// be cancelled but has no deadline (a request's, say) makes its attempts
// with a context that can never be cancelled and has a deadline, as one
// with a deadline does: a backend honours it on the connection, with no
// goroutine per call to watch the cancellation, whose wake-up would cost
// every attempt under load. The deadline, SettleGrace, keeps the promise
// that the call returns within half a second of a cancellation.
func TestCancellableContextAttemptsNeedNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		holder := mutex.New(fake.FakeBackend(t, srv), "cancellable")
		rec := &attemptContexts{Backend: fake.FakeBackend(t, srv)}
		waiter := mutex.New(rec, "cancellable")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		holder.Lock()
		// The waiter's first attempt finds the mutex held, and it waits.
		got := queue(t, ctx, waiter)
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		// The attempts only: the release has a bound of its own.
		rec.mu.Lock()
		calls, cancellable, unbounded, longest := rec.calls, rec.cancellable, rec.unbounded, rec.longest
		rec.mu.Unlock()
		waiter.Unlock()
		if calls < 2 {
			t.Fatalf("%d script calls; want the failed attempt and the one that acquired at least", calls)
		}
		if cancellable != 0 || unbounded != 0 {
			t.Errorf("of %d script calls, %d had a context that can be cancelled and %d one with no deadline; want none", calls, cancellable, unbounded)
		}
		if longest > wait.SettleGrace {
			t.Errorf("a call had %v left to its deadline; want SettleGrace (%v) at most", longest, wait.SettleGrace)
		}
	})
}
