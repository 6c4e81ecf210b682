package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// waitBehindDeadWokenHead queues a dead head (an entry whose process is
// gone) on the mutex name while loop retakes it with short holds, and
// returns how long a live waiter behind the dead head waited.
func waitBehindDeadWokenHead(t *testing.T, srv *miniredis.Miniredis, name string, opt mutex.Option, loop func(held chan<- struct{}, stop <-chan struct{})) time.Duration {
	t.Helper()
	key := "dsync:mutex:{" + name + "}"
	now := time.Now()
	dead := "deadhub/deadop|2000|deadowner"
	srv.ZAdd(key+":queue", float64(now.UnixMilli()), dead)
	srv.ZAdd(key+":expiry", float64(now.Add(15*time.Second).UnixMilli()), dead)
	held, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		loop(held, stop)
	}()
	<-held
	waiter := mutex.New(fake.FakeBackend(t, srv), name, opt)
	start := time.Now()
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := waiter.LockContext(wctx)
	waited := time.Since(start)
	close(stop)
	if err != nil {
		<-done
		t.Fatalf("waiter gave up after %v: %v", waited, err)
	}
	waiter.Unlock()
	<-done
	if m, _ := srv.ZMembers(key + ":queue"); len(m) != 0 {
		t.Errorf("entries left in the queue: %q", m)
	}
	return waited
}

// deadHeadBound is how long a waiter behind a dead woken head may wait
// with threshold after: the head's window (3 thresholds), its hand-off
// lease, and a release or two.
func deadHeadBound(after time.Duration) time.Duration {
	return 3*after + 2*time.Second + 10*time.Millisecond
}

// TestFakeTimeDeadWokenHeadBehindReenteringHolderBounded: the holder that
// woke a head retakes the mutex with re-entrant short holds (an owner that
// locks twice and unlocks twice). The look at the queue belongs to the
// release that frees the mutex, not to the inner release, which frees
// nothing and cannot hand it over: the waiter behind the dead head gets the
// mutex after the dead head's hand-off lease, as with single holds.
func TestFakeTimeDeadWokenHeadBehindReenteringHolderBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		const name = "deadhead-reentrant"
		after := 20 * time.Millisecond
		opt := mutex.WithHandoffAfter(after)
		greedy := mutex.New(fake.FakeBackend(t, srv), name, opt)
		waited := waitBehindDeadWokenHead(t, srv, name, opt, func(held chan<- struct{}, stop <-chan struct{}) {
			for i := range 100000 {
				ctx := dsync.WithOwner(context.Background())
				if err := greedy.LockContext(ctx); err != nil {
					t.Errorf("lock: %v", err)
					return
				}
				if err := greedy.LockContext(ctx); err != nil {
					t.Errorf("re-entry: %v", err)
					return
				}
				if i == 0 {
					close(held)
				}
				time.Sleep(5 * time.Millisecond)
				if err := greedy.UnlockContext(ctx); err != nil {
					t.Errorf("inner unlock: %v", err)
				}
				if err := greedy.UnlockContext(ctx); err != nil {
					t.Errorf("outer unlock: %v", err)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
		t.Logf("the waiter behind a dead woken head acquired after %v", waited)
		if bound := deadHeadBound(after); waited > bound {
			t.Errorf("the waiter behind a dead woken head, with the holder re-entering, acquired after %v; want within %v", waited, bound)
		}
	})
}
