package fault

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Defect (236e413): an unlock inside the expiry margin is refused. The
// lease is marked lost when Done closes, the margin before the server's
// expiry, and core.Handle.Unlock then returns ErrNotHeld without any I/O,
// so a hold still on the server is not released: the unlock that used to
// succeed now fails, and every other owner waits until the server's expiry
// (up to the margin, which WithExpiryMargin may set to half the lease).
func TestAdversaryUnlockInsideMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		const lease, margin = time.Second, 400 * time.Millisecond
		m := mutex.New(b, "inmargin", mutex.WithLease(lease), mutex.WithExpiryMargin(margin), mutex.WithLogger(nil))
		ctx := dsync.WithOwner(context.Background())
		if err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		// Inside the margin: Done has closed, the server still holds it
		// for some 300ms.
		time.Sleep(lease - margin + 100*time.Millisecond)
		synctest.Wait()
		if err := m.UnlockContext(ctx); err != nil {
			t.Errorf("unlock %v after a %v fixed lease (margin %v), the hold still on the server: %v; want it released", lease-margin+100*time.Millisecond, lease, margin, err)
		}
		s, err := m.State(context.Background())
		if err != nil || s.Locked {
			t.Errorf("after the unlock: state %+v, %v; want it free", s, err)
		}
	})
}

// Defect (236e413), as for the mutex: semaphore.Release inside the expiry
// margin returns ErrNotHeld without any I/O (the lease counts as lost once
// Done closed), so permits still held on the server are not given back
// until the server's expiry.
func TestAdversarySemaphoreReleaseInsideMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		const lease, margin = time.Second, 400 * time.Millisecond
		s := semaphore.New(b, "inmargin", 2, semaphore.WithLease(lease), semaphore.WithExpiryMargin(margin), semaphore.WithLogger(nil))
		ctx := dsync.WithOwner(context.Background())
		if err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease - margin + 100*time.Millisecond)
		synctest.Wait()
		if err := s.Release(ctx, 1); err != nil {
			t.Errorf("release inside the margin, the permit still on the server: %v; want it released", err)
		}
		if n, err := s.Available(context.Background()); err != nil || n != 2 {
			t.Errorf("after the release: %d available, %v; want 2", n, err)
		}
	})
}

// Defect (236e413), as for the mutex: RUnlockContext inside the expiry
// margin returns ErrNotHeld without any I/O, leaving the read hold on the
// server, so a writer waits until the server's expiry.
func TestAdversaryRUnlockInsideMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		const lease, margin = time.Second, 400 * time.Millisecond
		m := rwlock.New(b, "inmargin", rwlock.WithLease(lease), rwlock.WithExpiryMargin(margin), rwlock.WithLogger(nil))
		ctx := dsync.WithOwner(context.Background())
		if err := m.RLockContext(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease - margin + 100*time.Millisecond)
		synctest.Wait()
		if err := m.RUnlockContext(ctx); err != nil {
			t.Errorf("read unlock inside the margin, the hold still on the server: %v; want it released", err)
		}
		w := dsync.WithOwner(context.Background())
		if ok, err := m.TryLockContext(w); err != nil || !ok {
			t.Errorf("a writer after the read unlock: %v, %v; want the write lock at once", ok, err)
		} else if err := m.UnlockContext(w); err != nil {
			t.Error(err)
		}
	})
}

// Guard (passes on defects): a lease scheduler that retires stops its
// Watch, and the watch channel is unsubscribed after the hub's linger; a
// scheduler re-created and retired again leaves nothing subscribed either.
func TestAdversaryWatchRetires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		for round := range 3 {
			m := mutex.New(b, "retire", mutex.WithLease(time.Second), mutex.WithLogger(nil))
			ctx := dsync.WithOwner(context.Background())
			if err := m.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if ch := srv.PubSubChannels("dsync-watch*"); len(ch) != 1 {
				t.Errorf("round %d, while held: watch channels %v; want one", round, ch)
			}
			if err := m.UnlockContext(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Second) // idle retire and linger: a second each
			synctest.Wait()
			if ch := srv.PubSubChannels("*"); len(ch) != 0 {
				t.Errorf("round %d, retired: channels %v still subscribed; want none", round, ch)
			}
		}
	})
}

// Guard (passes on defects): an acquisition with a ctx whose deadline has
// already passed (Detach now keeps the deadline kind, with SettleGrace
// more) fails with an error matching context.DeadlineExceeded, or
// succeeds; either way nothing is left held or registered once unlocked.
func TestAdversaryExpiredCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		holder := mutex.New(b, "expired", mutex.WithLogger(nil))
		hctx := dsync.WithOwner(context.Background())
		if err := holder.LockContext(hctx); err != nil {
			t.Fatal(err)
		}
		m := mutex.New(b, "expired", mutex.WithLogger(nil))
		ctx, cancel := context.WithDeadline(dsync.WithOwner(context.Background()), time.Now().Add(-time.Millisecond))
		defer cancel()
		if err := m.LockContext(ctx); err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("LockContext, held elsewhere, ctx expired: %v; want DeadlineExceeded", err)
		}
		if ok, err := m.TryLockContext(ctx); ok || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("TryLockContext, ctx expired: %v, %v; want false, DeadlineExceeded", ok, err)
		}
		if err := holder.UnlockContext(hctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		checkFree(t, m)
	})
}

// Guard (passes on defects): the lease-0 check that a reconnection of the
// pub/sub connection triggers for fixed leases neither deletes, shortens
// nor extends any hold: mutex, fairlock, rwlock read and write holds and a
// semaphore permit stay held, their Done open, until the lease ends, and
// all are free shortly after it.
func TestAdversaryCheckChangesNothing(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	const lease = 1500 * time.Millisecond
	bg := context.Background()
	mu := mutex.New(b, "chk-m", mutex.WithLease(lease), mutex.WithLogger(nil))
	fl := fairlock.New(b, "chk-f", fairlock.WithLease(lease), fairlock.WithLogger(nil))
	rr := rwlock.New(b, "chk-r", rwlock.WithLease(lease), rwlock.WithLogger(nil))
	rw := rwlock.New(b, "chk-w", rwlock.WithLease(lease), rwlock.WithLogger(nil))
	se := semaphore.New(b, "chk-s", 2, semaphore.WithLease(lease), semaphore.WithLogger(nil))
	ctx := dsync.WithOwner(bg)
	start := time.Now()
	for _, err := range []error{mu.LockContext(ctx), fl.LockContext(ctx), rr.RLockContext(ctx), rw.LockContext(ctx), se.Acquire(ctx, 1)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	dones := []<-chan struct{}{mu.Done(ctx), fl.Done(ctx), rr.RDone(ctx), rw.Done(ctx), se.Done(ctx)}
	ttl0, _ := mu.State(bg)
	if _, err := do(bg, srv.Addr(), "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatal(err)
	}
	// Wait for the watch channel to be subscribed again, then for the
	// check and its quick rechecks (8 × 5 ms).
	for i := 0; ; i++ {
		r, err := do(bg, srv.Addr(), "PUBSUB", "CHANNELS", "dsync-watch*")
		if l, ok := r.([]any); err == nil && ok && len(l) > 0 {
			break
		}
		if i == 200 {
			t.Fatal("the watch channel was not subscribed again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	if time.Since(start) > lease/2 {
		t.Skip("too slow a machine to tell")
	}
	for i, d := range dones {
		select {
		case <-d:
			t.Errorf("hold %d: Done closed by the check", i)
		default:
		}
	}
	ttl1, err := mu.State(bg)
	if err != nil || !ttl1.Locked || ttl1.TTL > ttl0.TTL {
		t.Errorf("mutex after the check: %+v, %v; want held, TTL ≤ %v", ttl1, err, ttl0.TTL)
	}
	if ok, err := fl.IsLocked(bg); err != nil || !ok {
		t.Errorf("fairlock after the check: %v, %v; want held", ok, err)
	}
	if st, err := rr.State(bg); err != nil || st.Readers != 1 {
		t.Errorf("rwlock read after the check: %+v, %v; want one reader", st, err)
	}
	if st, err := rw.State(bg); err != nil || st.WriterCount != 1 || st.TTL > lease {
		t.Errorf("rwlock write after the check: %+v, %v; want held", st, err)
	}
	if n, err := se.Available(bg); err != nil || n != 1 {
		t.Errorf("semaphore after the check: %d available, %v; want 1", n, err)
	}
	// Not extended: all free soon after the lease ends.
	time.Sleep(time.Until(start.Add(lease + 100*time.Millisecond)))
	if s, err := mu.State(bg); err != nil || s.Locked {
		t.Errorf("mutex after its lease: %+v, %v; want free", s, err)
	}
	if ok, err := fl.IsLocked(bg); err != nil || ok {
		t.Errorf("fairlock after its lease: %v, %v; want free", ok, err)
	}
	if st, err := rr.State(bg); err != nil || st.Readers != 0 {
		t.Errorf("rwlock read after its lease: %+v, %v; want free", st, err)
	}
	if st, err := rw.State(bg); err != nil || st.WriterCount != 0 {
		t.Errorf("rwlock write after its lease: %+v, %v; want free", st, err)
	}
	if n, err := se.Available(bg); err != nil || n != 2 {
		t.Errorf("semaphore after its lease: %d available, %v; want 2", n, err)
	}
}

// Attack on 5399e21: the same owner acquires again right after a failed
// acquisition whose clean-up is still under way in the background on a
// stalled server. Once the server answers, the new acquisition must hold
// the mutex once (the clean-up must not undo it), and its unlock must leave
// the mutex free (no hold left that nobody releases).
func TestAdversaryReacquireDuringCleanup(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	m := mutex.New(b, "reacq", mutex.WithLogger(nil))
	owner := dsync.WithOwner(context.Background())
	end := pauseServer(t, srv, "DEBUG SLEEP", 1500*time.Millisecond)
	ctx, cancel := context.WithTimeout(owner, 200*time.Millisecond)
	err := m.LockContext(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("first LockContext on a stalled server: %v; want DeadlineExceeded", err)
	}
	ctx2, cancel2 := context.WithTimeout(owner, 8*time.Second)
	defer cancel2()
	if err := m.LockContext(ctx2); err != nil {
		t.Fatalf("second LockContext of the same owner: %v", err)
	}
	end()
	wait.Settle()
	if n, err := m.HoldCount(ctx2); err != nil || n != 1 {
		t.Errorf("after the clean-up: hold count %d, %v; want 1", n, err)
	}
	s, err := m.State(ctx2)
	if err != nil || !s.Locked {
		t.Errorf("after the clean-up: state %+v, %v; want held by the second acquisition", s, err)
	}
	if err := m.UnlockContext(ctx2); err != nil {
		t.Errorf("unlock: %v", err)
	}
	checkFree(t, m)
}

// Attack on 5399e21: a hand-off to a waiter whose acquisition just timed
// out on a stalled server, the holder's unlock queued before the waiter's
// clean-up; the waiter's owner acquires again at once. The clean-up must
// give back the handed hold, the new acquisition hold the mutex once, and
// nothing be left held after its unlock.
func TestAdversaryHandoffToTimedOutWaiter(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	m := mutex.New(b, "handto", mutex.WithLogger(nil))
	a := dsync.WithOwner(context.Background())
	if err := m.LockContext(a); err != nil {
		t.Fatal(err)
	}
	owner := dsync.WithOwner(context.Background())
	ctx, cancel := context.WithTimeout(owner, 400*time.Millisecond)
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- m.LockContext(ctx) }()
	for i := 0; ; i++ {
		s, err := m.State(a)
		if err == nil && s.Waiters == 1 {
			break
		}
		if i == 200 {
			t.Fatal("the waiter did not register")
		}
		time.Sleep(5 * time.Millisecond)
	}
	end := pauseServer(t, srv, "DEBUG SLEEP", 1500*time.Millisecond)
	unlocked := make(chan error, 1)
	go func() { unlocked <- m.UnlockContext(a) }()
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiter's LockContext on a stalled server: %v; want DeadlineExceeded", err)
	}
	ctx2, cancel2 := context.WithTimeout(owner, 8*time.Second)
	defer cancel2()
	if err := m.LockContext(ctx2); err != nil {
		t.Fatalf("second LockContext of the waiter's owner: %v", err)
	}
	end()
	if err := <-unlocked; err != nil {
		t.Errorf("holder's unlock: %v", err)
	}
	wait.Settle()
	if n, err := m.HoldCount(ctx2); err != nil || n != 1 {
		t.Errorf("after the clean-up: hold count %d, %v; want 1", n, err)
	}
	if err := m.UnlockContext(ctx2); err != nil {
		t.Errorf("unlock: %v", err)
	}
	checkFree(t, m)
}

// Attack on 5399e21 and 236e413: the backend is closed while a failed
// acquisition's clean-up is still under way in the background and the
// scheduler's watch subscription is in use; the clean-up ends (Settle
// returns) and no goroutine is left (goleak, in TestMain). The hold the
// server grants the queued attempt expires by itself.
func TestAdversaryCloseDuringCleanup(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	other := newBackend(t, srv.Addr())
	held := mutex.New(b, "closing-held", mutex.WithLease(time.Second), mutex.WithLogger(nil))
	hctx := dsync.WithOwner(context.Background())
	if err := held.LockContext(hctx); err != nil { // starts the scheduler and its watch
		t.Fatal(err)
	}
	m := mutex.New(b, "closing", mutex.WithLease(time.Second), mutex.WithLogger(nil))
	end := pauseServer(t, srv, "DEBUG SLEEP", time.Second)
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 200*time.Millisecond)
	err := m.LockContext(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LockContext on a stalled server: %v; want DeadlineExceeded", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	end()
	wait.Settle()
	<-held.Done(hctx)
	// Both holds expire by themselves within their 1 s lease.
	for _, name := range []string{"closing", "closing-held"} {
		o := mutex.New(other, name, mutex.WithLease(time.Second), mutex.WithLogger(nil))
		c, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 3*time.Second)
		if err := o.LockContext(c); err != nil {
			t.Errorf("%s after Close: %v; want it acquired once the hold expired", name, err)
		} else if err := o.UnlockContext(c); err != nil {
			t.Error(err)
		}
		cancel()
	}
}
