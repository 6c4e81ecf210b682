package fault

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Guard (passes on defects): an acquisition with a ctx whose deadline has
// already passed (Detach now keeps the deadline kind, with SettleGrace
// more) fails with an error matching context.DeadlineExceeded, or
// succeeds; either way nothing is left held or registered once unlocked.
func TestExpiredCtxLeavesNothing(t *testing.T) {
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

// Attack on 5399e21: the same owner acquires again right after a failed
// acquisition whose clean-up is still under way in the background on a
// stalled server. Once the server answers, the new acquisition must hold
// the mutex once (the clean-up must not undo it), and its unlock must leave
// the mutex free (no hold left that nobody releases).
func TestReacquireDuringCleanup(t *testing.T) {
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
func TestHandoffToTimedOutWaiterGivenBack(t *testing.T) {
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
func TestCloseDuringCleanup(t *testing.T) {
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
