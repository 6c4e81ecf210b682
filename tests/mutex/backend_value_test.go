package mutex_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// TestUnlockThroughAnotherBackendKeepsHold: defect 4, as the rule now
// stands: a hold belongs to the backend value it was taken through. An
// unlock through another handle of the process on the same server, on a
// backend value of its own, is refused with ErrNotHeld saying so, and
// leaves the hold alive; the first backend value releases it, and its
// watchdog stops.
func TestUnlockThroughAnotherBackendKeepsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "twobackends"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		other := mutex.New(fake.FakeBackend(t, srv), name)
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := m2.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) || !strings.Contains(err.Error(), "another backend value") {
			t.Errorf("m2.UnlockContext(o) = %v, want ErrNotHeld naming the other backend value", err)
		}
		if locked, err := other.IsLocked(ctx); err != nil || !locked {
			t.Errorf("after the refused unlock: locked %v, %v; want held", locked, err)
		}
		time.Sleep(time.Minute) // the watchdog keeps the hold
		select {
		case <-m1.Done(o):
			t.Fatal("m1.Done(o) closed while o holds the mutex")
		default:
		}
		if err := m1.UnlockContext(o); err != nil {
			t.Fatalf("m1.UnlockContext(o) = %v", err)
		}
		select {
		case <-m1.Done(o):
		default:
			t.Errorf("m1.Done(o) still open after the owner released through m1")
		}
		// Long after, the hold is still gone.
		time.Sleep(time.Minute)
		if locked, _ := other.IsLocked(ctx); locked {
			t.Errorf("mutex held a minute after the owner released it")
		}
	})
}

// TestReentryThroughAnotherBackend: defect 4 (reverse), a re-entry through another backend value starts a second lease, and whichever is not released last reports a false loss.
func TestReentryThroughAnotherBackend(t *testing.T) {
	for _, order := range []string{"m1 then m2", "m2 then m1"} {
		t.Run(order, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "reentertwo"
				logs := &logRecords{}
				o := dsync.WithOwner(ctx)
				m1 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(logs.logger()))
				m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(logs.logger()))
				other := mutex.New(fake.FakeBackend(t, srv), name)
				if err := m1.LockContext(o); err != nil {
					t.Fatal(err)
				}
				if err := m2.LockContext(o); err != nil { // re-entry
					t.Fatal(err)
				}
				if n, err := m1.HoldCount(o); err != nil || n != 2 {
					t.Fatalf("HoldCount after re-entry through m2 = %d, %v; want 2", n, err)
				}
				first, second := m1, m2
				if order == "m2 then m1" {
					first, second = m2, m1
				}
				if err := first.UnlockContext(o); err != nil {
					t.Errorf("first UnlockContext: %v", err)
				}
				if err := second.UnlockContext(o); err != nil {
					t.Errorf("second UnlockContext: %v", err)
				}
				if locked, err := other.IsLocked(ctx); err != nil || locked {
					t.Errorf("IsLocked after two unlocks = %v, %v; want free", locked, err)
				}
				for i, m := range []*mutex.Mutex{m1, m2} {
					select {
					case <-m.Done(o):
					default:
						t.Errorf("m%d.Done(o) still open after the owner's final unlock", i+1)
					}
				}
				// Past a renewal interval (and the whole lease): a lease left
				// behind would find the hold gone and report it lost.
				time.Sleep(31 * time.Second)
				if n := logs.count(slog.LevelWarn, "hold lost"); n > 0 {
					t.Errorf("%d \"hold lost\" records after the owner released every hold it took:%v", n, logs)
				}
				m1.UnlockContext(o) // clean up
				m2.UnlockContext(o)
			})
		})
	}
}

// TestHoldNotSeenThroughAnotherBackendValue: owner o holds the mutex
// through backend value b1; a second handle of the same process on the
// same server, through its own backend value b2 (a component with its own
// pool), sees no hold of o's: Done(o) is closed, Token(o) and
// UnlockContext(o) are ErrNotHeld, the latter saying that the hold was
// taken through another backend value, and the hold stays as it was. The
// server, asked through b2, still says o holds it once.
func TestHoldNotSeenThroughAnotherBackendValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "second"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		select {
		case <-m2.Done(o):
		default:
			t.Errorf("m2.Done(o) is open: b2 keeps no hold of o's")
		}
		if _, err := m2.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("m2.Token(o) = %v, want ErrNotHeld", err)
		}
		if err := m2.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) || !strings.Contains(err.Error(), "another backend value") {
			t.Errorf("m2.UnlockContext(o) = %v, want ErrNotHeld naming the other backend value", err)
		}
		if n, err := m2.HoldCount(o); err != nil || n != 1 {
			t.Errorf("m2.HoldCount(o) = %d, %v; want 1", n, err)
		}
		select {
		case <-m1.Done(o):
			t.Errorf("m1.Done(o) closed by the refused unlock")
		default:
		}
		if err := m1.UnlockContext(o); err != nil {
			t.Errorf("m1.UnlockContext(o) = %v", err)
		}
		time.Sleep(time.Minute)
	})
}

// TestUnlockThroughAnotherBackendValueIsRefused: owner o holds the lock
// of the same name on two independent servers (a RedLock-style
// multi-lock), first on server 2, then on server 1. An unlock through a
// handle on server 2 built on a backend value of its own (another
// component of the process) is refused with ErrNotHeld saying that the
// hold was taken through another backend value, and changes nothing: a
// hold belongs to the backend value that took it. Released through that
// one, each server's hold is freed, the other's kept.
func TestUnlockThroughAnotherBackendValueIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv1, srv2 := fake.Fake(t), fake.Fake(t)
		ctx := context.Background()
		const name = "twoservers"
		o := dsync.WithOwner(ctx)
		m2 := mutex.New(fake.FakeBackend(t, srv2), name, mutex.WithLogger(nil))
		m1 := mutex.New(fake.FakeBackend(t, srv1), name, mutex.WithLogger(nil))
		other2 := mutex.New(fake.FakeBackend(t, srv2), name, mutex.WithLogger(nil))
		probe1 := mutex.New(fake.FakeBackend(t, srv1), name, mutex.WithLogger(nil))
		probe2 := mutex.New(fake.FakeBackend(t, srv2), name, mutex.WithLogger(nil))
		if err := m2.LockContext(o); err != nil { // server 2 first
			t.Fatal(err)
		}
		if err := m1.LockContext(o); err != nil { // then server 1
			t.Fatal(err)
		}
		err := other2.UnlockContext(o)
		if !errors.Is(err, dsync.ErrNotHeld) || !strings.Contains(err.Error(), "another backend value") {
			t.Errorf("UnlockContext(o) through a backend value that did not take the hold = %v; want ErrNotHeld naming the other backend value", err)
		}
		if locked, err := probe2.IsLocked(ctx); err != nil || !locked {
			t.Errorf("server 2 after the refused unlock: locked = %v, %v; want held", locked, err)
		}
		if err := m2.UnlockContext(o); err != nil {
			t.Errorf("UnlockContext(o) through the backend value that took the hold on server 2 = %v", err)
		}
		if locked, err := probe2.IsLocked(ctx); err != nil || locked {
			t.Errorf("server 2 after o's unlock: locked = %v, %v; want free", locked, err)
		}
		if locked, err := probe1.IsLocked(ctx); err != nil || !locked {
			t.Errorf("server 1 after o's unlock on server 2: locked = %v, %v; want held", locked, err)
		}
		if err := m1.UnlockContext(o); err != nil {
			t.Errorf("UnlockContext(o) on server 1 = %v", err)
		}
		time.Sleep(time.Minute)
	})
}

// TestTokenAndDoneArePerServer: two independent servers with the same
// mutex name and the same owner (a RedLock over two servers). Token and
// Done on a handle of server 2, where the owner holds nothing (or lost its
// hold), answer with the owner's hold on server 1: a token and an open
// Done for a hold that does not exist on that server.
func TestTokenAndDoneArePerServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv1, srv2 := fake.Fake(t), fake.Fake(t)
		ctx := context.Background()
		const name = "twoservers"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv1), name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv2), name, mutex.WithLogger(nil))
		x2 := mutex.New(fake.FakeBackend(t, srv2), name, mutex.WithLogger(nil))

		// Server 2 is held by someone else: o gets server 1 only.
		x2.Lock()
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if ok, err := m2.TryLockContext(o); ok || err != nil {
			t.Fatalf("TryLock on server 2, held by another owner = %v, %v", ok, err)
		}
		if tok, err := m2.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("server 2: Token(o) = %d, %v; want ErrNotHeld: o holds nothing on server 2 (its hold is on server 1)", tok, err)
		}
		select {
		case <-m2.Done(o):
		default:
			t.Errorf("server 2: Done(o) is open though o holds nothing on server 2")
		}
		x2.Unlock()

		// o takes server 2 as well, then loses it (the server's data is lost).
		if err := m2.LockContext(o); err != nil {
			t.Fatal(err)
		}
		done2 := m2.Done(o)
		srv2.FlushAll()
		select {
		case <-done2:
		case <-time.After(11 * time.Second): // one renewal interval
			t.Fatal("server 2's hold lost: not signalled")
		}
		if tok, err := m2.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("server 2 after its hold was lost: Token(o) = %d, %v; want ErrNotHeld", tok, err)
		}
		select {
		case <-m2.Done(o):
		default:
			t.Errorf("server 2 after its hold was lost: a fresh Done(o) is open (it is server 1's hold)")
		}
		m1.UnlockContext(o)
		time.Sleep(time.Minute)
	})
}

// TestAmbiguousReleaseOnOtherServerKeepsHold: owner o holds the mutex on server
// 1 only and calls UnlockContext through a handle on server 2. The first
// release attempt fails with a connection error (the script did not run);
// the retry finds nothing of o's on server 2 (-1). Core.Release takes the
// -1 after an ambiguous attempt as "an earlier attempt released the last
// hold" and applies it to the lease it was given, which is server 1's:
// UnlockContext returns nil, server 1's lease ends (renewals stop, Done
// closes), yet server 1 still holds the mutex, and o can no longer
// release it.
func TestAmbiguousReleaseOnOtherServerKeepsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv1, srv2 := fake.Fake(t), fake.Fake(t)
		ctx := context.Background()
		const name = "ambiguous"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv1), name, mutex.WithLogger(nil))
		fb2 := &flaky{Backend: fake.FakeBackend(t, srv2)}
		m2 := mutex.New(fb2, name, mutex.WithLogger(nil))
		probe1 := mutex.New(fake.FakeBackend(t, srv1), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		done1 := m1.Done(o)
		fb2.failNext.Store(true)
		err := m2.UnlockContext(o)
		if !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("UnlockContext through server 2, where o holds nothing = %v; want ErrNotHeld", err)
		}
		select {
		case <-done1:
			t.Errorf("server 1's hold: Done closed by an unlock sent to server 2")
		default:
		}
		if locked, _ := probe1.IsLocked(ctx); locked {
			if err := m1.UnlockContext(o); err != nil {
				t.Errorf("server 1 still locked by o, but m1.UnlockContext(o) = %v: o cannot release it", err)
			}
		}
		time.Sleep(time.Minute)
	})
}

// TestLocalWaiterNotStrandedByRefusedRelease: a waiter queued in the
// session behind owner o's hold (see Lease.Enqueue) stays queued when o
// tries to release through another backend value of the process, which is
// refused and changes nothing, and acquires at once when o releases
// through the backend value that took the hold.
func TestLocalWaiterNotStrandedByRefusedRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "stranded"
		b1 := fake.FakeBackend(t, srv)
		m1 := mutex.New(b1, name, mutex.WithLogger(nil))
		m3 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		// A wait that gives up leaves b1's hub subscribed for a second, so
		// that the next waiter through b1 queues in the session.
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		if err := m1.LockContext(wctx); err == nil {
			t.Fatal("a second owner acquired")
		}
		cancel()
		got := make(chan error, 1)
		go func() { got <- m1.LockContext(ctx) }() // ownerless, queued behind o's hold
		synctest.Wait()
		if err := m3.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) { // same server, other backend value
			t.Fatalf("release through another backend value: %v, want ErrNotHeld", err)
		}
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("the queued waiter returned while o holds the mutex: %v", err)
		default:
		}
		released := time.Now()
		if err := m1.UnlockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d != 0 {
			t.Errorf("the waiter queued behind o's hold acquired %v after o released it, want at once", d)
		}
		m1.Unlock()
	})
}
