package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// Same owner re-enters through a handle with a shorter fixed lease: the
// server key now expires in 1s, but the local lease (watchdog, 30s) keeps
// its deadline and next renewal in 10s. Another process takes the mutex
// while the holder's Done is still open.
func TestFakeTimeShorterLeaseReentryKeepsLongerExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		ctx := dsync.WithOwner(context.Background())
		long := mutex.New(b, "mix")
		short := mutex.New(b, "mix", mutex.WithLease(time.Second))
		if err := long.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := short.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		other := mutex.New(fake.FakeBackend(t, srv), "mix")
		ok, err := other.TryLockContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-long.Done(ctx):
		default:
			if ok {
				t.Errorf("another owner acquired while the holder's Done is still open (holder thinks it holds 2)")
			}
		}
		if ok {
			other.Unlock()
		}
		time.Sleep(time.Minute)
	})
}

// TestNoRenewalSpinAfterLongerReentry: owner o holds the mutex through a
// handle with a 600ms watchdog lease and re-enters through a handle with a
// 3s one (another component of the same process). The server keeps the
// longer expiry and Lease.Extend moves the lease's deadline to it, with its
// next renewal 1s later. That renewal (for 600ms, which expire_at_least
// leaves alone) succeeds, but renewedLocked only moves next when the new
// deadline is later than the current one: next stays in the past, the
// lease is pushed back due, and the scheduler renews it again at once, in
// a loop, until sent+600ms passes the 3s deadline. With a 30s watchdog
// and a 5 min fixed lease re-entering, that is 170s of back-to-back
// script calls. The package promises one renewal per lease/3.
func TestNoRenewalSpinAfterLongerReentry(t *testing.T) {
	srv := testserver.Real(t)
	name := uniqueName("spin")
	cb := &countCalls{Backend: srv.NewBackend(t)}
	o := dsync.WithOwner(context.Background())
	short := mutex.New(cb, name, mutex.WithWatchdog(600*time.Millisecond), mutex.WithLogger(nil))
	long := mutex.New(cb, name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
	if err := short.LockContext(o); err != nil {
		t.Fatal(err)
	}
	defer short.UnlockContext(o)
	if err := long.LockContext(o); err != nil { // re-entry: 3s on the server
		t.Fatal(err)
	}
	defer long.UnlockContext(o)
	before := cb.n.Load()
	time.Sleep(2500 * time.Millisecond)
	calls := cb.n.Load() - before
	// A 600ms watchdog renews every 200ms: about 13 calls in 2.5s.
	if calls > 40 {
		t.Errorf("%d renewal calls in 2.5s for one hold on a 600ms watchdog (want about 13): the scheduler spins", calls)
	}
	select {
	case <-short.Done(o):
		t.Errorf("hold lost")
	default:
	}
}

// TestShorterReentryLeaseClientGivesUpFirst: a re-entry through a
// handle whose lease is shorter than the remaining expiry on the server
// leaves the server's expiry alone (store_extending), but the client's
// lease is extended by its own, longer TTL from the re-entry (Lease.Extend).
// When renewals then fail, Done fires up to a renewal interval after the
// server expired the key: another owner holds the mutex while the first
// still has no lost signal (the lease package promises the client gives
// up no later than the server).
func TestShorterReentryLeaseClientGivesUpFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		fb := &flaky{Backend: fake.FakeBackend(t, srv)}
		const name = "reentry"
		o := dsync.WithOwner(context.Background())
		long := mutex.New(fb, name, mutex.WithLogger(nil))                                // 30s watchdog
		short := mutex.New(fb, name, mutex.WithLease(time.Second), mutex.WithLogger(nil)) // 1s fixed
		if err := long.LockContext(o); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		done := long.Done(o)
		time.Sleep(9 * time.Second) // just before the first renewal
		if err := short.LockContext(o); err != nil {
			t.Fatal(err) // re-entry: the server keeps its expiry (21s left)
		}
		fb.fail.Store(true) // from now on every renewal fails

		other := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		for {
			ok, err := other.TryLockContext(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if time.Since(start) > time.Minute {
				t.Fatal("the hold never expired on the server")
			}
			time.Sleep(100 * time.Millisecond)
		}
		took := time.Since(start)
		select {
		case <-done:
		default:
			var lost time.Duration
			select {
			case <-done:
			case <-time.After(time.Minute):
			}
			lost = time.Since(start)
			t.Errorf("another owner acquired the mutex %v after the first owner's hold started, but the first owner's Done fired only at %v: both held it for %v",
				took, lost, lost-took)
		}
		other.Unlock()
		fb.fail.Store(false)
		time.Sleep(2 * time.Minute)
	})
}

// TestReentryDuringHandOffLease: the same root as
// TestShorterReentryLeaseClientGivesUpFirst, without any failure. A
// hold handed to a waiter starts on a 2s lease, which its first renewal
// (at 2s/3) would extend. A re-entry by the same owner through a handle
// with a 1s lease leaves the server's 2s expiry alone, but Lease.Extend
// reschedules the client's lease on its own 30s TTL: next renewal at 10s.
// The hold expires on the server at 2s; another owner takes the mutex; the
// first owner's Done stays open until the renewal at 10s.
func TestReentryDuringHandOffLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "handreenter"
		b := fake.FakeBackend(t, srv)
		m1 := mutex.New(b, name, mutex.WithLogger(nil))                               // default 30s watchdog
		m2 := mutex.New(b, name, mutex.WithLease(time.Second), mutex.WithLogger(nil)) // 1s fixed
		holder := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		x := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		holder.Lock()
		got := make(chan error, 1)
		go func() { got <- m1.LockContext(o) }()
		synctest.Wait()
		holder.Unlock() // handed to o on a 2s lease
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := m2.LockContext(o); err != nil { // re-entry, 1s lease
			t.Fatal(err)
		}
		done := m1.Done(o)
		// Whenever another owner gets the mutex, o's Done must have fired
		// before. With the watchdog renewing o's hold, nobody gets it.
		xHolds := false
		for time.Since(start) <= time.Minute && !xHolds {
			ok, err := x.TryLockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if xHolds = ok; ok {
				select {
				case <-done:
				default:
					t.Errorf("another owner took the mutex %v after o's re-entry, with no failure anywhere, while o's Done is open",
						time.Since(start))
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !xHolds {
			for range 2 {
				if err := m1.UnlockContext(o); err != nil {
					t.Errorf("o's unlock after a minute of holding: %v", err)
				}
			}
			x.Lock()
		}
		x.Unlock()
		time.Sleep(time.Minute)
	})
}
