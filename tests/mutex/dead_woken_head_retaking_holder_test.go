package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeDeadWokenHeadBehindRetakingHolderBounded: holds shorter than
// the threshold let a woken head's window pass with plain releases, which
// look at nobody. When that head's process died, nothing of its own comes
// back when it is due: the holder that woke it, still retaking the mutex,
// hands it over at its first release past the window, to the dead head
// for the 2s hand-off lease, and the live waiter behind gets it when that
// runs out, not at its heartbeat 5s later.
func TestFakeTimeDeadWokenHeadBehindRetakingHolderBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "deadhead"
		key := "dsync:mutex:{" + name + "}"
		after := 20 * time.Millisecond // the greedy client's 1ms holds are short
		opt := mutex.WithHandoffAfter(after)
		now := time.Now()
		dead := "deadhub/deadop|2000|deadowner"
		srv.ZAdd(key+":queue", float64(now.UnixMilli()), dead)
		srv.ZAdd(key+":expiry", float64(now.Add(15*time.Second).UnixMilli()), dead)
		stop, done := make(chan struct{}), make(chan struct{})
		greedyLoop(t, srv, name, stop, done, opt)
		waiter := mutex.New(fake.FakeBackend(t, srv), name, opt)
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := waiter.LockContext(wctx)
		waited := time.Since(start)
		if err != nil {
			t.Fatalf("waiter gave up after %v: %v", waited, err)
		}
		close(stop)
		waiter.Unlock()
		<-done
		t.Logf("the waiter behind a dead woken head acquired after %v", waited)
		// The window (3 thresholds), the dead head's hand-off lease, and
		// a release or two.
		if bound := 3*after + 2*time.Second + 10*time.Millisecond; waited > bound {
			t.Errorf("the waiter behind a dead woken head acquired after %v; want within %v", waited, bound)
		}
		if m, _ := srv.ZMembers(key + ":queue"); len(m) != 0 {
			t.Errorf("entries left in the queue: %q", m)
		}
	})
}
