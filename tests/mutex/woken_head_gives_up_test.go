package mutex_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeWokenHeadGivingUpLeavesNextWaiterServed: a client locks and
// unlocks in a loop, each hold shorter than the hand-off threshold, so
// that each release deletes the key and its next Lock takes the mutex
// with a plain SET. The release woke the head waiter, whose attempt found
// such a plain hold and, within its 3 thresholds, did not flag it; the
// head then gives up (its context ends). The waiter behind it must still
// be served within a few thresholds of that, not at its 5s heartbeat:
// the holds, plain and unflagged, are released without a look at the
// queue.
func TestFakeTimeWokenHeadGivingUpLeavesNextWaiterServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "wokengivesup"
		greedy := mutex.New(fake.FakeBackend(t, srv), name)
		greedy.Lock()

		// The head, whose attempts once queued take a little longer than
		// the greedy client's, so that the greedy client's next Lock gets
		// there first; and a waiter behind it.
		hb := &slowed{Backend: fake.FakeBackend(t, srv)}
		head := mutex.New(hb, name)
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		headGot := queue(t, hctx, head)
		hb.delay.Store(int64(200 * time.Microsecond))
		next := mutex.New(fake.FakeBackend(t, srv), name)
		nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
		defer ncancel()
		nextGot := queue(t, nctx, next)

		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			// 100ms of holds at most, so that a waiter left to its
			// heartbeat is not served while they last.
			for range 200 {
				greedy.Unlock() // a hold of 500µs: shorter than the threshold
				greedy.Lock()
				select {
				case <-stop:
					greedy.Unlock()
					return
				default:
				}
				time.Sleep(500 * time.Microsecond)
			}
			greedy.Unlock()
		}()

		// The head was woken by the first release, and found the greedy
		// client's next hold: it gives up within its 3 thresholds.
		time.Sleep(time.Millisecond)
		cancel()
		if err := <-headGot; !errors.Is(err, context.Canceled) {
			t.Fatalf("head waiter: %v, want context.Canceled", err)
		}
		gaveUp := time.Now()
		err := <-nextGot
		waited := time.Since(gaveUp)
		close(stop)
		if err != nil {
			t.Fatalf("the waiter behind the head: %v after %v", err, waited)
		}
		next.Unlock()
		<-done
		assertOnlyToken(t, srv, name)
		t.Logf("the waiter behind the head that gave up acquired %v after", waited)
		if limit := 10 * mutex.DefaultHandoffAfter; waited > limit {
			t.Errorf("the waiter behind a woken head that gave up acquired %v after; want within %v (a few thresholds)", waited, limit)
		}
	})
}

// slowed delays each script call by delay, once set.
type slowed struct {
	backend.Backend
	delay atomic.Int64
}

func (s *slowed) Eval(ctx context.Context, sc *backend.Script, keys []string, args ...any) (any, error) {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.Backend.Eval(ctx, sc, keys, args...)
}
