package mutex_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// counting counts script calls, and delays each, as a longer network path
// would.
type counting struct {
	backend.Backend
	delay time.Duration
	calls atomic.Int64
}

func (c *counting) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.calls.Add(1)
	time.Sleep(c.delay)
	return c.Backend.Eval(ctx, s, keys, args...)
}

// queue starts LockContext on m in the background and returns once the
// waiter is asleep, registered on the server.
func queue(t *testing.T, ctx context.Context, m *mutex.Mutex) <-chan error {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- m.LockContext(ctx) }()
	synctest.Wait()
	select {
	case err := <-got:
		t.Fatalf("LockContext returned at once: %v", err)
	default:
	}
	return got
}

// greedyLoop has a client release and re-lock name every millisecond
// until stop is closed, and closes done then: a client that would win
// every race against a woken waiter, which has a round trip to make
// first. It returns the token of its first hold.
func greedyLoop(t *testing.T, srv *miniredis.Miniredis, name string, stop, done chan struct{}, opts ...mutex.Option) int64 {
	greedy := mutex.New(fake.FakeBackend(t, srv), name, opts...)
	greedy.Lock()
	first, _ := greedy.Token(context.Background())
	go func() {
		defer close(done)
		for {
			time.Sleep(time.Millisecond)
			greedy.Unlock()
			greedy.Lock()
			select {
			case <-stop:
				greedy.Unlock()
				return
			default:
			}
		}
	}()
	return first
}

func TestFakeTimeReleaseHandsMutexToWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		// With hand-offs at every release, a greedy client cannot win:
		// the release hands the mutex to the waiter with its wake-up.
		handOff := mutex.WithHandoffAfter(0)
		stop, done := make(chan struct{}), make(chan struct{})
		first := greedyLoop(t, srv, "hot", stop, done, handOff)
		wb := &counting{Backend: fake.FakeBackend(t, srv), delay: 200 * time.Microsecond}
		waiter := mutex.New(wb, "hot", handOff)
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err := waiter.LockContext(wctx)
		waited, calls := time.Since(start), wb.calls.Load()
		if err != nil {
			t.Fatalf("waiter starved for %v: %v", waited, err)
		}
		token, err := waiter.Token(ctx)
		if err != nil || token <= first {
			t.Errorf("token %d, %v; want above the greedy client's first, %d", token, err, first)
		}
		held, err := waiter.HoldCount(ctx)
		if err != nil || held != 1 {
			t.Errorf("HoldCount = %d, %v; want 1", held, err)
		}
		close(stop)
		waiter.Unlock() // the greedy client is queued now: handed to it
		<-done
		// The attempt before joining and the one after, and no more: the
		// next release handed the mutex over with its wake-up.
		if calls != 2 {
			t.Errorf("waiter made %d calls to acquire, want 2", calls)
		}
		if waited > 2*time.Millisecond {
			t.Errorf("waiter got the mutex %v after asking; want at the next release, within 1ms", waited)
		}
	})
}

// The bound of the two modes: a waiter among clients that release and
// retake the mutex in a tight loop, each hold 1ms, acquires within the
// hand-off threshold plus one hand-off when the holds are as long as the
// threshold: until then each release frees the mutex and wakes it, and
// the greedy client's next Lock gets there first. When the holds are
// shorter than the threshold, the first release wakes it, later ones wake
// nobody, and the first release 3 thresholds after the wake-up hands it
// the mutex.
func TestFakeTimeStarvingWaiterIsHandedTheMutex(t *testing.T) {
	for _, after := range []time.Duration{mutex.DefaultHandoffAfter, 20 * time.Millisecond} {
		t.Run(after.String(), func(t *testing.T) {
			due, calls := after, int64(after/time.Millisecond)+3 // holds as long as the threshold: an attempt per release
			if after > time.Millisecond {
				due, calls = 3*after, 5 // short holds: woken once, then due
			}
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				opt := mutex.WithHandoffAfter(after)
				stop, done := make(chan struct{}), make(chan struct{})
				first := greedyLoop(t, srv, "hot", stop, done, opt)
				wb := &counting{Backend: fake.FakeBackend(t, srv), delay: 200 * time.Microsecond}
				waiter := mutex.New(wb, "hot", opt)
				start := time.Now()
				wctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				err := waiter.LockContext(wctx)
				waited, made := time.Since(start), wb.calls.Load()
				if err != nil {
					t.Fatalf("waiter starved for %v: %v", waited, err)
				}
				if token, err := waiter.Token(ctx); err != nil || token <= first {
					t.Errorf("token %d, %v; want above the greedy client's first, %d", token, err, first)
				}
				close(stop)
				waiter.Unlock()
				<-done
				// The greedy client releases every 1ms: the first release
				// after the waiter is due hands the mutex over.
				if waited < due || waited > due+3*time.Millisecond {
					t.Errorf("waiter got the mutex %v after asking; want past %v, within the waiter's 1ms timer slack and one more release", waited, due)
				}
				if made > calls {
					t.Errorf("waiter made %d calls to acquire, want at most %d", made, calls)
				}
				t.Logf("threshold %v: acquired after %v, %d calls", after, waited, made)
			})
		})
	}
}

func TestFakeTimeHandedHoldIsRenewedToFullLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := mutex.New(fake.FakeBackend(t, srv), "renew", mutex.WithHandoffAfter(0))
		holder.Lock()
		waiter := mutex.New(fake.FakeBackend(t, srv), "renew")
		got := queue(t, ctx, waiter)
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		// A waiter that died would hold the mutex up for 2s at most...
		if ttl, err := waiter.TTL(ctx); err != nil || ttl <= 0 || ttl > 2*time.Second {
			t.Fatalf("TTL right after the hand-off = %v, %v; want the 2s hand-off lease", ttl, err)
		}
		// ...and a live one's watchdog extends it to the 30s lease at its
		// first renewal, a third of the way through.
		time.Sleep(time.Second)
		if ttl, err := waiter.TTL(ctx); err != nil || ttl < 29*time.Second {
			t.Fatalf("TTL 1s after the hand-off = %v, %v; want renewed to 30s", ttl, err)
		}
		done := waiter.Done(ctx)
		time.Sleep(2 * time.Minute)
		select {
		case <-done:
			t.Fatal("handed hold lost while renewed")
		default:
		}
		waiter.Unlock()
	})
}

func TestFakeTimeLateHandOffIsConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := mutex.New(fake.FakeBackend(t, srv), "late")
		holder.Lock()
		wb := &counting{Backend: fake.FakeBackend(t, srv)}
		waiter := mutex.New(wb, "late")
		got := queue(t, ctx, waiter)
		// The waiter's last attempt was 3s ago when the hand-off comes:
		// too long to know the 2s hand-off lease still runs, so it makes
		// sure with one more attempt, which finds the hold its own.
		time.Sleep(3 * time.Second)
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if n := wb.calls.Load(); n != 3 {
			t.Errorf("waiter made %d calls, want 3 (two attempts, one confirmation)", n)
		}
		if n, err := waiter.HoldCount(ctx); err != nil || n != 1 {
			t.Errorf("HoldCount = %d, %v; want 1: the confirmation is not a re-entry", n, err)
		}
		if ttl, err := waiter.TTL(ctx); err != nil || ttl < 29*time.Second {
			t.Errorf("TTL after the confirmation = %v, %v; want the full 30s lease", ttl, err)
		}
		waiter.Unlock()
		if locked, err := waiter.IsLocked(ctx); err != nil || locked {
			t.Errorf("IsLocked after one Unlock = %v, %v; want free", locked, err)
		}
	})
}

func TestFakeTimeHandOffWithFixedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := mutex.New(fake.FakeBackend(t, srv), "fixed", mutex.WithLease(5*time.Second))
		holder.Lock()
		waiter := mutex.New(fake.FakeBackend(t, srv), "fixed", mutex.WithLease(5*time.Second))
		got := queue(t, ctx, waiter)
		time.Sleep(100 * time.Millisecond)
		released := time.Now()
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		// A fixed lease is handed over whole, and expires as it would
		// have: Done fires no later than the server drops the hold.
		if ttl, err := waiter.TTL(ctx); err != nil || ttl != 5*time.Second {
			t.Errorf("TTL right after the hand-off = %v, %v; want the fixed 5s", ttl, err)
		}
		<-waiter.Done(ctx)
		lost := time.Since(released)
		if lost > 5*time.Second || lost < 4*time.Second {
			t.Errorf("Done fired %v after the hand-off, want within (4s, 5s]", lost)
		}
		waiter.Unlock() // lost: logged, no panic
	})
}

func TestFakeTimeHandOffToDeadWaiterLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := mutex.New(fake.FakeBackend(t, srv), "y")
		holder.Lock()
		if _, err := holder.Token(ctx); err != nil { // the hold in the full form
			t.Fatal(err)
		}
		// The entry a waiter leaves when its process dies: it expires in
		// 15s, asks for a 2s lease, and has waited past the hand-off
		// threshold. Its registration flagged the hold.
		markWaiting(t, srv, "dsync:mutex:{y}")
		arrived := float64(time.Now().Add(-time.Second).UnixMilli())
		expires := float64(time.Now().Add(15 * time.Second).UnixMilli())
		if _, err := srv.ZAdd("dsync:mutex:{y}:queue", arrived, "deadhub/deadop|2000|deadowner"); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.ZAdd("dsync:mutex:{y}:expiry", expires, "deadhub/deadop|2000|deadowner"); err != nil {
			t.Fatal(err)
		}
		// A hold of the threshold or longer: its release hands the mutex to
		// a head that waited past the threshold (a shorter one would wake
		// it; see TestFakeTimeDeadWokenWaiterDelaysOthersBounded).
		time.Sleep(mutex.DefaultHandoffAfter)
		released := time.Now()
		holder.Unlock() // handed to the dead waiter

		other := mutex.New(fake.FakeBackend(t, srv), "y")
		if ok, err := other.TryLockContext(ctx); ok || err != nil {
			t.Fatalf("TryLock while handed to another: %v, %v; want false", ok, err)
		}
		handed, owner, _, _ := state(t, srv, "dsync:mutex:{y}")
		if owner != "deadowner" {
			t.Fatalf("owner after the hand-off = %q, want deadowner", owner)
		}
		if err := other.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d < 2*time.Second || d > 2*time.Second+10*time.Millisecond {
			t.Errorf("acquired %v after the release; want as the 2s hand-off lease ran out", d)
		}
		// The dead waiter's hold took a token; the next is above it.
		if after, err := other.Token(ctx); err != nil || after <= handed {
			t.Errorf("token %d, %v after the hand-off's %d", after, err, handed)
		}
		other.Unlock()
	})
}

// deaf is a backend whose subscriptions never deliver a message, as when
// the wake-up is lost on the way.
type deaf struct{ backend.Backend }

func (d deaf) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	s, err := d.Backend.Subscribe(ctx, channel)
	if err != nil {
		return nil, err
	}
	return deafSub{s}, nil
}

type deafSub struct{ backend.Subscription }

func (s deafSub) Receive(ctx context.Context) (backend.Message, error) {
	for {
		if m, err := s.Subscription.Receive(ctx); err != nil {
			return m, err
		}
	}
}

func TestFakeTimeGivenUpWaiterPassesHandOffOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := mutex.New(remote{fake.FakeBackend(t, srv)}, "pass")
		holder.Lock()
		// The first waiter never hears that the mutex was handed to it,
		// and gives up at its deadline.
		first := mutex.New(deaf{fake.FakeBackend(t, srv)}, "pass")
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		firstGot := queue(t, fctx, first)
		time.Sleep(10 * time.Millisecond)
		second := mutex.New(fake.FakeBackend(t, srv), "pass")
		secondGot := queue(t, ctx, second)

		holder.Unlock() // handed to the first waiter, which does not hear it
		synctest.Wait()
		if _, owner, _, _ := state(t, srv, "dsync:mutex:{pass}"); owner == "" {
			t.Fatal("not handed over")
		}
		if err := <-firstGot; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("first waiter: %v, want DeadlineExceeded", err)
		}
		start := time.Now()
		// Giving up undoes the hand-off and passes the mutex on, instead
		// of leaving it to lapse 2s later.
		if err := <-secondGot; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 10*time.Millisecond {
			t.Errorf("second waiter acquired %v after the first gave up; want at once", d)
		}
		if n, err := second.HoldCount(ctx); err != nil || n != 1 {
			t.Errorf("second HoldCount = %d, %v", n, err)
		}
		second.Unlock()
		assertOnlyToken(t, srv, "pass")
	})
}

// remote hides from its caller which waiter a script handed the mutex to,
// as for a releaser in another process: the waiter learns of it only from
// the server's message.
type remote struct{ backend.Backend }

func (r remote) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	reply, err := r.Backend.Eval(ctx, s, keys, args...)
	if handOff(reply) {
		reply = reply.([]any)[:2]
	}
	return reply, err
}

// handOff reports whether reply is that of a script that handed the mutex
// to a waiter: {n, hold id, address, token, owner} (see wait.Reply), as
// opposed to an acquisition's {1, count, token, hold id}.
func handOff(reply any) bool {
	a, ok := reply.([]any)
	if !ok || len(a) < 5 {
		return false
	}
	_, id := a[1].(string) // not an acquisition's hold count
	_, address := a[2].(string)
	return id && address
}

func TestFakeTimeHandOffInProcessSkipsPubSub(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		// The subscriptions of the backend value deliver nothing; the
		// releaser, through the same backend value, wakes the waiter from
		// the release's reply.
		b := deaf{fake.FakeBackend(t, srv)}
		holder := mutex.New(b, "local")
		holder.Lock()
		waiter := mutex.New(b, "local")
		got := queue(t, ctx, waiter)
		released := time.Now()
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d != 0 {
			t.Errorf("waiter acquired %v after the release, want at once", d)
		}
		waiter.Unlock()
	})
}

// loseHandOff runs scripts, but loses the first reply that reports a
// hand-off, as a timeout would.
type loseHandOff struct {
	backend.Backend
	lost atomic.Bool
}

func (l *loseHandOff) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	reply, err := l.Backend.Eval(ctx, s, keys, args...)
	if handOff(reply) && l.lost.CompareAndSwap(false, true) {
		return nil, errors.New("read tcp: i/o timeout")
	}
	return reply, err
}

func TestFakeTimeLostReleaseReplyStillWakesLocalWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		lb := &loseHandOff{Backend: fake.FakeBackend(t, srv)}
		holder := mutex.New(lb, "lost")
		holder.Lock()
		// In the holder's process: the script leaves its wake-up to the
		// holder, which never hears whom the mutex went to.
		waiter := mutex.New(fake.FakeBackend(t, srv), "lost")
		got := queue(t, ctx, waiter)
		released := time.Now()
		holder.Unlock()
		if !lb.lost.Load() {
			t.Fatal("no hand-off reply was lost")
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		// The release's retry wakes the local waiters, and the one handed
		// the mutex finds it its own: well before the 2s hand-off lease
		// lapses or the 5s heartbeat.
		if d := time.Since(released); d > 100*time.Millisecond {
			t.Errorf("waiter acquired %v after the release, want within the release's retry", d)
		}
		if n, err := waiter.HoldCount(ctx); err != nil || n != 1 {
			t.Errorf("HoldCount = %d, %v; want 1", n, err)
		}
		waiter.Unlock()
	})
}
