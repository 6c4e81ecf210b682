package mutex_test

import (
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
// runs out, not at its heartbeat 5s later (7s before the look).
func TestFakeTimeDeadWokenHeadBehindRetakingHolderBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		const name = "deadhead"
		after := 20 * time.Millisecond // the greedy client's 1ms holds are short
		opt := mutex.WithHandoffAfter(after)
		greedy := mutex.New(fake.FakeBackend(t, srv), name, opt)
		waited := waitBehindDeadWokenHead(t, srv, name, opt, func(held chan<- struct{}, stop <-chan struct{}) {
			for i := range 100000 {
				greedy.Lock()
				if i == 0 {
					close(held)
				}
				time.Sleep(time.Millisecond)
				greedy.Unlock()
				select {
				case <-stop:
					return
				default:
				}
			}
		})
		t.Logf("the waiter behind a dead woken head acquired after %v", waited)
		if bound := deadHeadBound(after); waited > bound {
			t.Errorf("the waiter behind a dead woken head acquired after %v; want within %v", waited, bound)
		}
	})
}
