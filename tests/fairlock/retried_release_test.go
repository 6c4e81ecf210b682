package fairlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// The comment above each test describes the defect it pins; the test
// failed on 9f3ece2, before the fix.

var errNet = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: connection reset by peer")

// loseReply runs the next script call once armed, then runs during
// before failing it with a connection error: the call applied, its caller
// does not know, and retries.
type loseReply struct {
	backend.Backend
	armed  atomic.Bool
	during func()
}

func (l *loseReply) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if l.armed.CompareAndSwap(true, false) {
		if _, err := l.Backend.Eval(ctx, s, keys, args...); err != nil {
			return nil, err
		}
		l.during()
		return nil, errNet
	}
	return l.Backend.Eval(ctx, s, keys, args...)
}

// TestRetriedReleaseSparesNextHold: two goroutines of owner o queue
// behind another owner, then a third owner y queues. The lock goes to o's
// first goroutine (G1), whose final release hands it, in FIFO order, to
// o's second goroutine (G2: a new hold H2 of the same owner). The release's
// reply is lost; its retry (same operation id) finds owner o at the key and
// its id not among H2's ops, so it releases H2 as well and hands the lock
// to y: y holds the lock while G2, which never unlocked, is inside its
// critical section. release.lua checks the owner and the op memory, not
// the hold id the client knows.
func TestRetriedReleaseSparesNextHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "retryhand"
		o := dsync.WithOwner(ctx)
		open := func(b backend.Backend) *fairlock.Mutex { return fairlock.New(b, name, fairlock.WithLogger(nil)) }
		x := open(fake.FakeBackend(t, srv))
		lb := &loseReply{Backend: fake.FakeBackend(t, srv)}
		m1, m2, y := open(lb), open(fake.FakeBackend(t, srv)), open(fake.FakeBackend(t, srv))
		x.Lock()
		g1 := queueWaiter(t, o, m1)
		g2 := make(chan error, 1)
		go func() { g2 <- m2.LockContext(o) }()
		synctest.Wait()
		yctx := context.Background()
		yGot := queueWaiter(t, yctx, y)
		x.Unlock() // to G1
		if err := <-g1; err != nil {
			t.Fatal(err)
		}
		lb.during = func() {
			// The release handed the lock to G2, which takes it.
			if err := <-g2; err != nil {
				t.Errorf("G2: %v", err)
			}
		}
		lb.armed.Store(true)
		if err := m1.UnlockContext(o); err != nil { // G1's one unlock
			t.Logf("G1's UnlockContext: %v", err)
		}
		synctest.Wait()
		select {
		case err := <-yGot:
			if err == nil {
				t.Errorf("y acquired the fair lock while o's second goroutine holds it (handed to it in turn, never unlocked): G1's retried release released G2's hold")
				y.Unlock()
			}
		default:
			if n, err := m2.HoldCount(o); err != nil || n != 1 {
				t.Errorf("HoldCount(o) = %d, %v; want 1 (G2's hold)", n, err)
			}
			m2.UnlockContext(o)
			if err := <-yGot; err == nil {
				y.Unlock()
			}
		}
		time.Sleep(time.Minute)
	})
}
