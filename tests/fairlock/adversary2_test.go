package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Second adversarial review: each test fails on 9f3ece2 for the defect
// named above it.

var errAdv2Net = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: connection reset by peer")

// adv2LoseReply runs the next script call once armed, then runs during
// before failing it with a connection error: the call applied, its caller
// does not know, and retries.
type adv2LoseReply struct {
	backend.Backend
	armed  atomic.Bool
	during func()
}

func (l *adv2LoseReply) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if l.armed.CompareAndSwap(true, false) {
		if _, err := l.Backend.Eval(ctx, s, keys, args...); err != nil {
			return nil, err
		}
		l.during()
		return nil, errAdv2Net
	}
	return l.Backend.Eval(ctx, s, keys, args...)
}

// TestAdv2RetriedReleaseHandsOnNextHold: two goroutines of owner o queue
// behind another owner, then a third owner y queues. The lock goes to o's
// first goroutine (G1), whose final release hands it, in FIFO order, to
// o's second goroutine (G2: a new hold H2 of the same owner). The release's
// reply is lost; its retry (same operation id) finds owner o at the key and
// its id not among H2's ops, so it releases H2 as well and hands the lock
// to y: y holds the lock while G2, which never unlocked, is inside its
// critical section. release.lua checks the owner and the op memory, not
// the hold id the client knows.
func TestAdv2RetriedReleaseHandsOnNextHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "adv2retryhand"
		o := dsync.WithOwner(ctx)
		open := func(b backend.Backend) *fairlock.Mutex { return fairlock.New(b, name, fairlock.WithLogger(nil)) }
		x := open(fake.FakeBackend(t, srv))
		lb := &adv2LoseReply{Backend: fake.FakeBackend(t, srv)}
		m1, m2, y := open(lb), open(fake.FakeBackend(t, srv)), open(fake.FakeBackend(t, srv))
		x.Lock()
		g1 := advQueue(t, o, m1)
		g2 := make(chan error, 1)
		go func() { g2 <- m2.LockContext(o) }()
		synctest.Wait()
		yctx := context.Background()
		yGot := advQueue(t, yctx, y)
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

// adv2Chaos disturbs srv until stop closes: SCRIPT FLUSH, CLIENT KILL of
// pub/sub connections and of ordinary ones (replies lost mid-call).
func adv2Chaos(srv *testserver.Server, stop <-chan struct{}) {
	bg := context.Background()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+i%3*15) * time.Millisecond):
		}
		switch i % 4 {
		case 0:
			srv.FlushScripts(bg)
		case 1:
			srv.KillPubSub(bg)
		case 2:
			srv.Do(bg, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
		case 3:
			srv.FlushScripts(bg)
			srv.KillPubSub(bg)
		}
	}
}

// TestAdv2ChaosMutualExclusion: the fair lock's exclusion and tokens under
// SCRIPT FLUSH and killed connections for 5s, with several backend
// values, owned and ownerless holds, re-entry, TryLock and abandons.
func TestAdv2ChaosMutualExclusion(t *testing.T) {
	srv := testserver.Real(t)
	name := "adv2chaos-" + dsync.NewID()[:12]
	const workers = 8
	bs := make([]backend.Backend, 4)
	for i := range bs {
		bs[i] = srv.NewBackend(t, bredigo.WithTimeout(2*time.Second))
	}
	var (
		inside, violations, losses, acquired atomic.Int32
		mu                                   sync.Mutex
		tokens                               []int64
		errs                                 []string
	)
	stop, chaosDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(chaosDone); adv2Chaos(srv, stop) }()
	deadline := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := []fairlock.Option{fairlock.WithWatchdog(3 * time.Second), fairlock.WithWaiterTimeout(time.Second), fairlock.WithLogger(nil)}
			m := fairlock.New(bs[w%len(bs)], name, opts...)
			// A second handle on the same backend value: a hold is
			// released through the backend value that took it.
			m2 := fairlock.New(bs[w%len(bs)], name, opts...)
			for i := 0; time.Now().Before(deadline); i++ {
				owned := w%2 == 0
				ctx := context.Background()
				if owned {
					ctx = dsync.WithOwner(ctx)
				}
				var err error
				switch i % 3 {
				case 0:
					lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					err = m.LockContext(lctx)
					cancel()
				case 1:
					var ok bool
					ok, err = m.TryLockContext(ctx)
					if err == nil && !ok {
						time.Sleep(time.Millisecond)
						continue
					}
				default:
					err = m.LockContext(ctx)
				}
				if err != nil {
					continue
				}
				acquired.Add(1)
				done := m.Done(ctx)
				tok, terr := m.Token(ctx)
				if n := inside.Add(1); n != 1 {
					violations.Add(1)
					mu.Lock()
					errs = append(errs, fmt.Sprintf("worker %d entered with %d inside (token %d)", w, n-1, tok))
					mu.Unlock()
				}
				if terr == nil {
					mu.Lock()
					tokens = append(tokens, tok)
					mu.Unlock()
				}
				if owned && i%2 == 0 {
					m.LockContext(ctx)
					m2.UnlockContext(ctx)
				}
				time.Sleep(time.Duration(i%3) * time.Millisecond)
				select {
				case <-done:
					losses.Add(1)
				default:
				}
				inside.Add(-1)
				switch {
				case owned && i%4 == 0:
					m2.UnlockContext(ctx)
				case owned:
					m.UnlockContext(ctx)
				default:
					m.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-chaosDone
	t.Logf("%d acquisitions, %d holds lost", acquired.Load(), losses.Load())
	if v := violations.Load(); v > 0 && losses.Load() == 0 {
		t.Errorf("%d mutual exclusion violations with no loss signalled: %v", v, errs)
	} else if v > 0 {
		t.Logf("%d overlaps, %d losses signalled: %v", v, losses.Load(), errs)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("token %d after %d (hold %d)", tokens[i], tokens[i-1], i)
		}
	}
	probe := fairlock.New(srv.NewBackend(t), name)
	free := false
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if locked, err := probe.IsLocked(context.Background()); err == nil && !locked {
			free = true
			break
		}
	}
	if !free {
		s, _ := probe.State(context.Background())
		t.Errorf("fair lock still held 5s after every worker stopped: %+v", s)
	}
}
