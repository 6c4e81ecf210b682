package mutex_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeDeadWokenHeadBehindPerUseMutexBounded: a process that makes
// a Mutex value for each use (as redsync's NewMutex is used), all through
// one backend value, retakes the mutex with short holds. The release that
// woke the dead head was made through a value that is gone by its next
// release: the look at the queue must not be lost with it, or the waiter
// behind waits for its heartbeat and the dead head's lease (7s).
func TestFakeTimeDeadWokenHeadBehindPerUseMutexBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		const name = "deadhead-peruse"
		after := 20 * time.Millisecond
		opt := mutex.WithHandoffAfter(after)
		b := fake.FakeBackend(t, srv)
		waited := waitBehindDeadWokenHead(t, srv, name, opt, func(held chan<- struct{}, stop <-chan struct{}) {
			for i := range 100000 {
				m := mutex.New(b, name, opt)
				m.Lock()
				if i == 0 {
					close(held)
				}
				time.Sleep(5 * time.Millisecond)
				m.Unlock()
				select {
				case <-stop:
					return
				default:
				}
			}
		})
		t.Logf("the waiter behind a dead woken head acquired after %v", waited)
		if bound := deadHeadBound(after); waited > bound {
			t.Errorf("the waiter behind a dead woken head, with a Mutex value per use, acquired after %v; want within %v", waited, bound)
		}
	})
}
