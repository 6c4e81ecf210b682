package mutex_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// A release hands the mutex to a head waiter of its own session whatever
// its wait (see TestFakeTimeQueuedBehindLocalHoldInOrder); the heads of
// other sessions keep the two modes. These pin the edges of that rule.

// Two backend values of one process are two sessions: in normal mode a
// release through one wakes the other's head waiter to try (one attempt
// after the release), it does not hand it the mutex.
func TestFakeTimeOtherBackendValueHeadIsWokenToTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		ab := &counting{Backend: fake.FakeBackend(t, srv)}
		a := mutex.New(ab, "woken")
		bb := &counting{Backend: fake.FakeBackend(t, srv)}
		b := mutex.New(bb, "woken")
		warm(t, ctx, b, a)
		a.Lock()
		got := queue(t, ctx, b)
		calls := bb.calls.Load()
		a.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if n := bb.calls.Load() - calls; n != 1 {
			t.Errorf("the other backend value's head made %d calls after a normal-mode release, want 1 (woken to try)", n)
		}
		b.Unlock()
	})
}

// ForceUnlock through the head waiter's own backend value hands it the
// mutex, delivered in the process: no attempt of its own, a token above
// the forced hold's, and the forced holder told.
func TestFakeTimeForceHandsToHeadOfOwnSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		x := mutex.New(fake.FakeBackend(t, srv), "forced")
		wb := &counting{Backend: fake.FakeBackend(t, srv)}
		w := mutex.New(wb, "forced")
		f := mutex.New(wb, "forced")
		warm(t, ctx, x, w)
		x.Lock()
		held, err := x.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := queue(t, ctx, w)
		calls := wb.calls.Load()
		if ok, err := f.ForceUnlock(ctx); err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if n := wb.calls.Load() - calls; n != 1 {
			t.Errorf("%d calls for the force and the waiter's acquisition, want 1 (the force's)", n)
		}
		if tok, err := w.Token(ctx); err != nil || tok <= held {
			t.Errorf("the waiter's token %d, %v; want above %d", tok, err, held)
		}
		select {
		case <-x.Done(ctx):
		default:
			t.Error("the forced holder was not told")
		}
		w.Unlock()
	})
}

// A waiter of another session among goroutines that share a backend value
// and lock back to back: their hand-offs to each other never pass it,
// since the releases register them behind it, so it still acquires
// within the threshold plus the holds queued before it.
func TestFakeTimeWaiterAmongLocalHandOffsIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const greedy, hold = 3, time.Millisecond
		shared := fake.FakeBackend(t, srv)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range greedy {
			m := mutex.New(shared, "crowd")
			wg.Go(func() {
				for {
					m.Lock()
					time.Sleep(hold)
					m.Unlock()
					select {
					case <-stop:
						return
					default:
					}
				}
			})
		}
		time.Sleep(10 * hold) // the goroutines queue behind each other
		wb := &counting{Backend: fake.FakeBackend(t, srv), delay: 200 * time.Microsecond}
		waiter := mutex.New(wb, "crowd")
		for i := range 5 {
			start := time.Now()
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			err := waiter.LockContext(wctx)
			waited := time.Since(start)
			cancel()
			if err != nil {
				t.Fatalf("acquisition %d: waiter starved for %v: %v", i, waited, err)
			}
			// Past the threshold the next release hands it over; the
			// hold under way, and the greedy holds queued before it
			// registered, come first.
			if bound := mutex.DefaultHandoffAfter + (greedy+1)*hold + time.Millisecond; waited > bound {
				t.Errorf("acquisition %d: the waiter got the mutex %v after asking; want within %v", i, waited, bound)
			}
			t.Logf("acquisition %d after %v", i, waited)
			waiter.Unlock()
			time.Sleep(3 * hold)
		}
		close(stop)
		wg.Wait()
	})
}
