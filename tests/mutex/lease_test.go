package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// TestForceUnlockTellsFixedLeaseHolder: ForceUnlock's doc says
// "the holder learns of the loss at its next renewal, through Done". A
// hold on a fixed lease has no renewal: force-unlocked, even through the
// very handle that holds it, in the same process, its Done stays open and
// its Token valid until the fixed lease runs out (here a minute), while
// another owner holds the mutex. The process knows the lease it just took
// the hold from (ForceUnlock drops its local queue records, not the
// leases), and a fixed-lease holder is never told.
func TestForceUnlockTellsFixedLeaseHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "forcefixed"
		m := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLease(time.Minute), mutex.WithLogger(nil))
		y := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		m.Lock()
		done := m.Done(ctx)
		if ok, err := m.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		y.Lock()
		start := time.Now()
		select {
		case <-done:
		case <-time.After(11 * time.Second): // a watchdog holder would know by now
			tok, err := m.Token(ctx)
			t.Errorf("%v after this very handle force-unlocked its hold and another owner took the mutex, Done is open and Token = %d, %v", time.Since(start), tok, err)
		}
		y.Unlock()
		m.Unlock()
		time.Sleep(2 * time.Minute)
	})
}

// TestRenewalChecksHoldID: the batched renewal (renew_holds) checks only
// the owner at the lock key, not the hold id. Owner o holds A through one
// backend value; A is force-unlocked and another owner holds and releases
// the mutex; o then locks again through a second backend value of the same
// process (a new hold B). The first lease's renewals find "o" at the key
// and renew B as if it were A: the loss of A, during which another owner
// held the mutex, is never signalled on A's Done, and its Token stays A's.
func TestRenewalChecksHoldID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "holdid"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		x := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		doneA := m1.Done(o)
		tokA, _ := m1.Token(o)
		if ok, err := x.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		x.Lock() // another owner holds the mutex: o's hold A is over
		tokX, _ := x.Token(ctx)
		x.Unlock()
		if err := m2.LockContext(o); err != nil { // a new hold B for o
			t.Fatal(err)
		}
		tokB, _ := m2.Token(o)
		// Three renewal intervals of A's lease.
		time.Sleep(31 * time.Second)
		select {
		case <-doneA:
		default:
			tok, err := m1.Token(o)
			t.Errorf("hold A (token %d) was force-unlocked and another owner held the mutex (token %d) before o took hold B (token %d); 31s later A's Done is still open and m1.Token(o) = %d, %v: A's renewals renewed B",
				tokA, tokX, tokB, tok, err)
		}
		m2.UnlockContext(o)
		m1.UnlockContext(o)
		time.Sleep(time.Minute)
	})
}

// TestStaleLeaseSparesNewHold: the consequence of renew_holds checking
// only the owner, for mutual exclusion. Owner o's hold A, kept through a
// backend value with a 3s watchdog, is force-unlocked; o takes a new hold
// B through another backend value with the default 30s watchdog. A's lease
// goes on renewing B, with PEXPIRE 3s. When A's backend value then fails
// (its renewals stop), B expires on the server 3s later, while B's own lease
// believes it valid until its next renewal at 10s: another owner takes the
// mutex while o's Done for B is open.
func TestStaleLeaseSparesNewHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "shorten"
		o := dsync.WithOwner(ctx)
		fb1 := &flaky{Backend: fake.FakeBackend(t, srv)}
		m1 := mutex.New(fb1, name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		x := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if ok, err := x.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		if err := m2.LockContext(o); err != nil { // hold B, 30s watchdog
			t.Fatal(err)
		}
		start := time.Now()
		doneB := m2.Done(o)
		time.Sleep(1500 * time.Millisecond) // A's lease renewed B once, with 3s
		fb1.fail.Store(true)
		// Whenever another owner gets the mutex, B's Done must have fired
		// before. With B's own watchdog renewing it, nobody gets it.
		xHolds := false
		for time.Since(start) <= time.Minute && !xHolds {
			ok, err := x.TryLockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if xHolds = ok; ok {
				select {
				case <-doneB:
				default:
					t.Errorf("another owner took the mutex %v after o's hold B started (30s watchdog, renewed every 10s), while o's Done for B is open: B's expiry was cut to 3s by the renewals of o's earlier, force-unlocked hold A", time.Since(start))
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !xHolds {
			if err := m2.UnlockContext(o); err != nil {
				t.Errorf("o's unlock of B after a minute of holding: %v", err)
			}
			x.Lock()
		}
		x.Unlock()
		fb1.fail.Store(false)
		time.Sleep(time.Minute)
	})
}

// TestSubMillisecondLeaseNotCutShort: leases go to the server in whole
// milliseconds, truncated (core.Ms), while the client's lease keeps the
// exact duration. WithLease(2900µs) passes validation ("at least 1ms"),
// the key expires after 2ms, and the holder's Done fires only at 2.9ms:
// another owner holds the mutex meanwhile.
func TestSubMillisecondLeaseNotCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "subms"
		m := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLease(2900*time.Microsecond), mutex.WithLogger(nil))
		x := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		done := m.Done(o)
		time.Sleep(2500 * time.Microsecond)
		ok, err := x.TryLockContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			select {
			case <-done:
			default:
				t.Errorf("another owner acquired 2.5ms into a 2.9ms fixed lease whose Done is still open: the server was given 2ms")
			}
			x.Unlock()
		}
		time.Sleep(time.Second)
	})
}
