package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeQueuedWaitersAmongShortHoldsWaitBounded: a client tries the
// mutex in a loop (TryLock: it never queues), each hold shorter than the
// hand-off threshold, and three waiters of other processes queue at once,
// each releasing as soon as it acquires. Each, once at the head, is woken
// by a short release and lets the client's holds pass for 3 thresholds
// before it is handed the mutex: a waiter waits about 4 thresholds and a
// newcomer's hold for itself and for each waiter queued before it, even
// when their holds are next to nothing (the package documentation had
// promised that bound in all, plus those holds).
func TestFakeTimeQueuedWaitersAmongShortHoldsWaitBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "queuedshort"
		const hold = 500 * time.Microsecond
		greedy := mutex.New(fake.FakeBackend(t, srv), name)
		greedy.Lock()
		const n = 3
		var slow [n]*slowed
		var got [n]<-chan error
		var ms [n]*mutex.Mutex
		start := time.Now()
		for i := range n {
			slow[i] = &slowed{Backend: fake.FakeBackend(t, srv)}
			ms[i] = mutex.New(slow[i], name)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got[i] = queue(t, wctx, ms[i])
			slow[i].delay.Store(int64(200 * time.Microsecond))
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			held := true
			for range 1000 {
				if !held {
					time.Sleep(hold / 10)
				} else {
					time.Sleep(hold)
					greedy.Unlock()
				}
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if held, err = greedy.TryLockContext(ctx); err != nil {
					t.Error(err)
					return
				}
			}
			if held {
				greedy.Unlock()
			}
		}()
		var waited [n]time.Duration
		for i := range n {
			if err := <-got[i]; err != nil {
				t.Fatalf("waiter %d: %v", i, err)
			}
			waited[i] = time.Since(start)
			ms[i].Unlock()
		}
		close(stop)
		<-done
		t.Logf("waits: %v", waited)
		per := 4*mutex.DefaultHandoffAfter + 2*hold
		for i, w := range waited {
			if limit := time.Duration(i+1) * per; w > limit {
				t.Errorf("waiter %d (%d queued before it, each releasing at once) acquired after %v; want within %v", i, i, w, limit)
			}
		}
		// The bound is per waiter: the last waits past a single one.
		if waited[n-1] <= per {
			t.Errorf("waiter %d acquired after %v, within one waiter's bound %v: the short-hold window no longer applies per waiter; update the documentation", n-1, waited[n-1], per)
		}
	})
}
