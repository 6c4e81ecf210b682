package mutex_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/session"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// warm has one goroutine wait for m's name once, so that the process is
// subscribed to its channel, as it stays while the name is contended.
func warm(t *testing.T, ctx context.Context, holder, waiter *mutex.Mutex) {
	t.Helper()
	holder.Lock()
	got := queue(t, ctx, waiter)
	holder.Unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	waiter.Unlock()
}

// Waiters queued behind a hold of their own backend value's session are
// handed the mutex in turn, by the releases' replies, in both modes: in
// normal mode too a release hands the mutex to a head of its own session
// rather than waking it to try, which would cost it a round trip (before,
// the default's waiters made one attempt each: 7 calls, not 4).
func TestFakeTimeQueuedBehindLocalHoldInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []mutex.Option
	}{
		{"handoff", []mutex.Option{mutex.WithHandoffAfter(0)}},
		{"default", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				b := &counting{Backend: fake.FakeBackend(t, srv)}
				holder := mutex.New(b, "local", tc.opts...)
				waiters := []*mutex.Mutex{mutex.New(b, "local", tc.opts...), mutex.New(b, "local", tc.opts...), mutex.New(b, "local", tc.opts...)}
				warm(t, ctx, holder, waiters[0])

				holder.Lock()
				calls := b.calls.Load()
				order := make(chan int, len(waiters))
				for i, w := range waiters {
					go func() {
						if err := w.LockContext(ctx); err != nil {
							t.Error(err)
						}
						order <- i
						w.Unlock()
					}()
					synctest.Wait()
				}
				// Queued in this process, behind the hold: not a call made, not
				// an entry on the server.
				if n := b.calls.Load() - calls; n != 0 {
					t.Errorf("queued waiters made %d calls, want 0", n)
				}
				if srv.Exists("dsync:mutex:{local}:queue") {
					t.Error("waiters registered on the server while queued here")
				}
				holder.Unlock()
				for want := range waiters {
					if got := <-order; got != want {
						t.Fatalf("waiter %d acquired in turn %d", got, want)
					}
				}
				synctest.Wait()
				// One call per acquisition: the release that handed it over.
				if n := b.calls.Load() - calls; n != 4 {
					t.Errorf("%d calls for 3 contended acquisitions and their releases, want 4", n)
				}
				if locked, err := holder.IsLocked(ctx); err != nil || locked {
					t.Errorf("IsLocked at the end = %v, %v", locked, err)
				}
			})
		})
	}
}

func TestFakeTimeOtherBackendValueIsNotQueuedBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		// Two clients of one server, each with its own backend value: a
		// waiter queues behind holds of its own backend value's session
		// only, so the releaser, locking again while the other holds,
		// asks the server, and is handed the mutex by the other's release.
		ab := &counting{Backend: fake.FakeBackend(t, srv)}
		a := mutex.New(ab, "pair")
		bb := &counting{Backend: fake.FakeBackend(t, srv)}
		b := mutex.New(bb, "pair")
		warm(t, ctx, b, a)
		a.Lock()
		got := queue(t, ctx, b)
		a.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		calls := ab.calls.Load()
		again := queue(t, ctx, a)
		if n := ab.calls.Load() - calls; n != 1 {
			t.Errorf("releaser locking again made %d calls while the other backend value holds, want 1", n)
		}
		b.Unlock()
		if err := <-again; err != nil {
			t.Fatal(err)
		}
		if n, err := a.HoldCount(ctx); err != nil || n != 1 {
			t.Errorf("HoldCount = %d, %v", n, err)
		}
		a.Unlock()
	})
}

func TestFakeTimeOtherServerIsNotQueuedBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		// One name on two independent servers, as in a multi-lock: a
		// hold on one says nothing about the other.
		s1, s2 := fake.Fake(t), fake.Fake(t)
		b1 := fake.FakeBackend(t, s1)
		on1, on1too := mutex.New(b1, "multi"), mutex.New(b1, "multi")
		warm(t, ctx, on1, on1too)
		b2 := fake.FakeBackend(t, s2)
		on2, on2too := mutex.New(b2, "multi"), mutex.New(b2, "multi")
		warm(t, ctx, on2too, on2)
		on1.Lock()
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := on2.LockContext(tctx); err != nil {
			t.Fatalf("lock on the second server: %v", err)
		}
		on2.Unlock()
		on1.Unlock()
	})
}

func TestFakeTimeQueuedWaiterGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		b := fake.FakeBackend(t, srv)
		holder, waiter := mutex.New(b, "quit"), mutex.New(b, "quit")
		warm(t, ctx, holder, waiter)
		holder.Lock()
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := waiter.LockContext(wctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("LockContext = %v, want DeadlineExceeded", err)
		}
		holder.Unlock()
		if locked, err := holder.IsLocked(ctx); err != nil || locked {
			t.Errorf("IsLocked after the release = %v, %v; want free, handed to nobody", locked, err)
		}
		assertOnlyToken(t, srv, "quit")
	})
}

// stalling holds back the release script until release is closed.
type stalling struct {
	backend.Backend
	stalled chan struct{}
	release chan struct{}
}

func (s *stalling) Eval(ctx context.Context, sc *backend.Script, keys []string, args ...any) (any, error) {
	if len(args) > 13 { // a release carrying queued waiters (after the header, the threshold and the short-hold flag)
		close(s.stalled)
		<-s.release
	}
	return s.Backend.Eval(ctx, sc, keys, args...)
}

func TestFakeTimeQueuedWaiterGivesUpDuringRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		sb := &stalling{Backend: fake.FakeBackend(t, srv), stalled: make(chan struct{}), release: make(chan struct{})}
		holder, waiter := mutex.New(sb, "race"), mutex.New(sb, "race")
		warm(t, ctx, holder, waiter)
		holder.Lock()
		wctx, cancel := context.WithCancel(ctx)
		got := queue(t, wctx, waiter)
		unlocked := make(chan struct{})
		go func() { holder.Unlock(); close(unlocked) }()
		<-sb.stalled
		// The release carries the waiter's entry when the waiter gives
		// up: its clean-up must wait for the release, or the entry would
		// be registered after it left and handed a 2s lease nobody uses.
		cancel()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("LockContext returned before the release it was part of ended: %v", err)
		default:
		}
		start := time.Now()
		close(sb.release)
		<-unlocked
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("LockContext = %v, want Canceled", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("gave up %v after the release, want at once", d)
		}
		if locked, err := holder.IsLocked(ctx); err != nil || locked {
			t.Errorf("IsLocked = %v, %v; want the hand-off to the quitter undone", locked, err)
		}
	})
}

func TestFakeTimeQueuedWaiterOutlivesLostHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		b := fake.FakeBackend(t, srv)
		holder, waiter := mutex.New(b, "gone"), mutex.New(b, "gone")
		warm(t, ctx, holder, waiter)
		holder.Lock()
		start := time.Now()
		got := queue(t, ctx, waiter)
		// The hold vanishes from the server with no release to hand the
		// mutex on: the queued waiter asks the server at its heartbeat,
		// as a registered one would.
		srv.Del("dsync:mutex:{gone}")
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("waiter acquired %v after the hold vanished, want within the 5s heartbeat", d)
		}
		if n, err := waiter.HoldCount(ctx); err != nil || n != 1 {
			t.Errorf("HoldCount = %d, %v", n, err)
		}
		if err := holder.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("holder's unlock = %v, want ErrNotHeld", err)
		}
		waiter.Unlock()
	})
}

func TestFakeTimeReleaseOfVanishedHoldPassesQueueOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		b := fake.FakeBackend(t, srv)
		holder, waiter := mutex.New(b, "vanish"), mutex.New(b, "vanish")
		warm(t, ctx, holder, waiter)
		holder.Lock()
		got := queue(t, ctx, waiter)
		// The hold vanishes; its holder unlocks before a renewal notices.
		srv.Del("dsync:mutex:{vanish}")
		released := time.Now()
		if err := holder.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("unlock of the vanished hold = %v, want ErrNotHeld", err)
		}
		// The release still registered the queued waiter, and found
		// nobody else to wake it.
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d != 0 {
			t.Errorf("waiter acquired %v after the release, want at once", d)
		}
		waiter.Unlock()
	})
}

func TestFakeTimeQueuedWaiterTakesExpiredFixedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		b := fake.FakeBackend(t, srv)
		holder := mutex.New(b, "fixed", mutex.WithLease(300*time.Millisecond))
		waiter := mutex.New(b, "fixed")
		warm(t, ctx, holder, waiter)
		holder.Lock() // and never unlocked: the lease runs out
		start := time.Now()
		got := queue(t, ctx, waiter)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		// At the expiry, not at the 5s heartbeat.
		if d := time.Since(start); d > 310*time.Millisecond {
			t.Errorf("waiter acquired %v after queueing behind a 300ms lease, want at its expiry", d)
		}
		waiter.Unlock()
	})
}

// loseArmed loses the first reply that reports a hand-off once armed, as a
// timeout would.
type loseArmed struct {
	backend.Backend
	armed, lost atomic.Bool
}

func (l *loseArmed) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	reply, err := l.Backend.Eval(ctx, s, keys, args...)
	if l.armed.Load() && handOff(reply) && l.lost.CompareAndSwap(false, true) {
		return nil, errors.New("read tcp: i/o timeout")
	}
	return reply, err
}

func TestFakeTimeRetriedReleaseDoesNotQueueAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		lb := &loseArmed{Backend: fake.FakeBackend(t, srv)}
		holder, waiter := mutex.New(lb, "retry"), mutex.New(lb, "retry")
		warm(t, ctx, holder, waiter)
		holder.Lock()
		got := queue(t, ctx, waiter)
		lb.armed.Store(true)
		// The release registers the queued waiter and hands it the
		// mutex; its reply is lost. The waiter, woken, finds the mutex
		// its own, and the release's retry must not register it again.
		holder.Unlock()
		if !lb.lost.Load() {
			t.Fatal("no hand-off reply was lost")
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		waiter.Unlock()
		assertOnlyToken(t, srv, "retry")
		start := time.Now()
		holder.Lock()
		if d := time.Since(start); d != 0 {
			t.Errorf("next Lock took %v, want at once", d)
		}
		holder.Unlock()
	})
}

func TestFakeTimeOwnerReentersHoldHandedToIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		b := fake.FakeBackend(t, srv)
		releaser := mutex.New(b, "self")
		waiter := mutex.New(fake.FakeBackend(t, srv), "self")
		warm(t, ctx, releaser, waiter)
		warm(t, ctx, waiter, releaser) // both clients subscribed
		octx := dsync.WithOwner(ctx)
		releaser.Lock()
		got := queue(t, octx, waiter)
		releaser.Unlock() // handed to the owner's waiter, which has not run yet
		// The same owner, through a backend known to reach the hold, locks
		// again: a re-entry, not a wait behind its own hold.
		start := time.Now()
		if err := mutex.New(b, "self").LockContext(octx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("re-entry took %v, want at once", d)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if n, err := waiter.HoldCount(octx); err != nil || n != 2 {
			t.Errorf("HoldCount = %d, %v; want 2", n, err)
		}
		waiter.UnlockContext(octx)
		waiter.UnlockContext(octx)
	})
}

func TestFakeTimeQueuedWaiterWokenDuringReleaseWaitsForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		sb := &stalling{Backend: fake.FakeBackend(t, srv), stalled: make(chan struct{}), release: make(chan struct{})}
		cb := &counting{Backend: sb}
		holder, waiter := mutex.New(cb, "woken"), mutex.New(cb, "woken")
		warm(t, ctx, holder, waiter)
		holder.Lock()
		wctx, cancel := context.WithCancel(ctx)
		got := queue(t, wctx, waiter)
		unlocked := make(chan struct{})
		go func() { holder.Unlock(); close(unlocked) }()
		<-sb.stalled
		calls := cb.calls.Load()
		// Woken while the release that carries its entry is under way,
		// the waiter must not ask the server before that release has
		// registered it, nor give up before then.
		session.For(cb).Hub.WakeAll("dsync:mutex:{woken}:wake")
		synctest.Wait()
		if n := cb.calls.Load() - calls; n != 0 {
			t.Errorf("woken waiter made %d calls during the release that carries it, want 0", n)
		}
		cancel()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("LockContext returned before the release it was part of ended: %v", err)
		default:
		}
		close(sb.release)
		<-unlocked
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("LockContext = %v, want Canceled", err)
		}
		if locked, err := holder.IsLocked(ctx); err != nil || locked {
			t.Errorf("IsLocked = %v, %v; want the hand-off to the quitter undone", locked, err)
		}
	})
}

// twoHolds is an owner holding a mutex twice through a stalling backend,
// with a waiter queued behind it, while the owner's two releases run: the
// first, which carries the waiter, stalled; the second, which must neither
// take the queue again nor wait for the first, done.
type twoHolds struct {
	sb             *stalling
	holder, waiter *mutex.Mutex
	owner          context.Context
	got, first     <-chan error // the waiter's LockContext, the first release
}

func releaseTwice(t *testing.T, srv *miniredis.Miniredis, name string, wctx context.Context) twoHolds {
	t.Helper()
	ctx := context.Background()
	h := twoHolds{sb: &stalling{Backend: fake.FakeBackend(t, srv), stalled: make(chan struct{}), release: make(chan struct{})}}
	h.holder, h.waiter = mutex.New(h.sb, name), mutex.New(h.sb, name)
	warm(t, ctx, h.holder, h.waiter)
	h.owner = dsync.WithOwner(ctx)
	for range 2 {
		if err := h.holder.LockContext(h.owner); err != nil {
			t.Fatal(err)
		}
	}
	h.got = queue(t, wctx, h.waiter)
	first := make(chan error, 1)
	go func() { first <- h.holder.UnlockContext(h.owner) }()
	h.first = first
	<-h.sb.stalled
	if err := h.holder.UnlockContext(h.owner); err != nil {
		t.Fatalf("second release: %v", err)
	}
	return h
}

func TestFakeTimeConcurrentReleasesOfOneOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		h := releaseTwice(t, srv, "twice", ctx)
		select {
		case err := <-h.got:
			t.Fatalf("waiter returned before the release carrying it ran: %v", err)
		default:
		}
		start := time.Now()
		close(h.sb.release)
		if err := <-h.first; err != nil {
			t.Fatalf("first release: %v", err)
		}
		if err := <-h.got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("waiter acquired %v after the last release ran; want at once", d)
		}
		if n, err := h.holder.HoldCount(h.owner); err != nil || n != 0 {
			t.Errorf("owner's HoldCount = %d, %v; want 0", n, err)
		}
		h.waiter.Unlock()
		assertOnlyToken(t, srv, "twice")
	})
}

func TestFakeTimeQuitterWaitsForTheReleaseCarryingIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		wctx, cancel := context.WithCancel(ctx)
		h := releaseTwice(t, srv, "quit2", wctx)
		// The waiter gives up. The release that carries its entry has
		// not run; the other release of the same owner, which has, must
		// not let it leave before.
		cancel()
		synctest.Wait()
		select {
		case err := <-h.got:
			t.Fatalf("LockContext returned before the release carrying it ran: %v", err)
		default:
		}
		close(h.sb.release)
		if err := <-h.first; err != nil {
			t.Fatalf("first release: %v", err)
		}
		if err := <-h.got; !errors.Is(err, context.Canceled) {
			t.Fatalf("LockContext = %v, want Canceled", err)
		}
		if locked, err := h.holder.IsLocked(ctx); err != nil || locked {
			t.Errorf("IsLocked = %v, %v; want the hand-off to the quitter undone", locked, err)
		}
	})
}
