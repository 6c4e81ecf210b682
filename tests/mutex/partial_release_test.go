package mutex_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// TestHoldVanishedDuringPartialReleaseIsLost: defect 3, a renewal that finds the hold gone while a partial release is in flight drops the lease without reporting the loss.
func TestHoldVanishedDuringPartialReleaseIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		const name = "vanish"
		const lease = 30 * time.Second // the default: renewed every 10s
		b := &vanishOnRelease{Backend: fake.FakeBackend(t, srv), srv: srv,
			key: "dsync:mutex:{" + name + "}", pause: lease/3 + time.Second}
		o := dsync.WithOwner(context.Background())
		m := mutex.New(b, name, mutex.WithLogger(nil))
		for range 2 {
			if err := m.LockContext(o); err != nil {
				t.Fatal(err)
			}
		}
		b.armed.Store(true)
		err := m.UnlockContext(o) // 2 -> 1; the key vanishes; a renewal runs meanwhile
		if !b.fired.Load() {
			t.Fatal("the release was not intercepted")
		}
		t.Logf("partial UnlockContext: %v", err)
		if locked, _ := m.IsLocked(o); locked {
			t.Fatal("the key did not vanish")
		}
		returned := time.Now()
		select {
		case <-m.Done(o):
		case <-time.After(lease/3 + time.Second):
			t.Errorf("Done still open %v after the partial release returned, though a renewal found the hold gone during it: the loss was never reported",
				time.Since(returned))
		}
		if tok, err := m.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("Token = %d, %v; want ErrNotHeld: the hold is gone from the server", tok, err)
		}
		m.UnlockContext(o) // clean up whatever is left
	})
}

// TestPartialReleaseKeepsFixedLease: with a fixed lease (WithLease
// 10s, "every hold expires d after it was acquired, with no renewal"), a
// partial release restores the lease on the server (release.lua
// store_extending with ARGV[3]), but its reply carries no expiry and the
// client's lease keeps its deadline. A hold taken at 0, re-entered, and
// released once at 9s lives on the server until 19s, while Done reports it
// lost at 10s. The owner, told the hold is lost, cannot release it (the
// lost lease is forgotten: UnlockContext returns ErrNotHeld without I/O),
// so every other owner is shut out until 19s, 9s past the fixed lease.
func TestPartialReleaseKeepsFixedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "fixedpartial"
		o := dsync.WithOwner(ctx)
		m := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLease(10*time.Second), mutex.WithLogger(nil))
		other := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		start := time.Now()
		for range 2 {
			if err := m.LockContext(o); err != nil {
				t.Fatal(err)
			}
		}
		done := m.Done(o)
		time.Sleep(9 * time.Second)
		if err := m.UnlockContext(o); err != nil { // 2 -> 1
			t.Fatal(err)
		}
		<-done
		lostAt := time.Since(start)
		// Done closes the expiry margin (1% of the lease plus 2ms)
		// before the server's expiry.
		time.Sleep(100*time.Millisecond + 2*time.Millisecond)
		locked, err := other.IsLocked(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if locked {
			ttl, _ := other.TTL(ctx)
			t.Errorf("Done reported the hold lost at %v, but the server still holds it for %v more: the partial release at 9s extended the fixed lease on the server only", lostAt, ttl)
		}
		uerr := m.UnlockContext(o)
		if locked, _ := other.IsLocked(ctx); locked {
			t.Errorf("after the owner's final UnlockContext (%v) the mutex is still held: nobody can release it until the extended expiry", uerr)
		}
		for ok := false; !ok; time.Sleep(100 * time.Millisecond) {
			ok, _ = other.TryLockContext(ctx)
		}
		if took := time.Since(start); took > 10*time.Second+time.Second {
			t.Errorf("another owner got the mutex only %v after a hold on a fixed 10s lease was taken", took.Round(100*time.Millisecond))
		}
		other.Unlock()
		time.Sleep(time.Minute)
	})
}

// TestPartialReleaseThroughWatchdogHandleKeepsFixedLease: 2f610c6
// made a partial release restore the lease only for a watchdog lease
// (core.Handle.RestoredLease), but it asks the releasing handle's options,
// not the hold's lease. Owner o takes the mutex through a handle with a
// fixed 10s lease and re-enters through a handle of the same process with a
// 10s watchdog (another component's); at 9s it releases once through the
// watchdog handle. The release restores 10s on the server, so the hold
// lives until 19s, while the lease o keeps is the fixed one, which
// nothing renews: Done reports it lost at 10s, o's later UnlockContext
// does no I/O (ErrNotHeld), and every other owner is shut out until 19s.
// This is TestPartialReleaseKeepsFixedLease through a second handle.
func TestPartialReleaseThroughWatchdogHandleKeepsFixedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "fixedpartial"
		o := dsync.WithOwner(ctx)
		b := fake.FakeBackend(t, srv)
		fixed := mutex.New(b, name, mutex.WithLease(10*time.Second), mutex.WithLogger(nil))
		dog := mutex.New(b, name, mutex.WithWatchdog(10*time.Second), mutex.WithLogger(nil))
		other := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		start := time.Now()
		if err := fixed.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := dog.LockContext(o); err != nil { // re-entry
			t.Fatal(err)
		}
		done := fixed.Done(o)
		time.Sleep(9 * time.Second)
		if err := dog.UnlockContext(o); err != nil { // 2 -> 1
			t.Fatal(err)
		}
		<-done
		lostAt := time.Since(start)
		// Done closes the expiry margin (1% of the lease plus 2ms)
		// before the server's expiry.
		time.Sleep(100*time.Millisecond + 2*time.Millisecond)
		if locked, err := other.IsLocked(ctx); err != nil || locked {
			ttl, _ := other.TTL(ctx)
			t.Errorf("Done reported o's fixed-lease hold lost at %v, but the server still holds it for %v more (locked = %v, %v): the partial release through the watchdog handle extended the fixed lease on the server only", lostAt, ttl, locked, err)
		}
		for ok := false; !ok; time.Sleep(100 * time.Millisecond) {
			ok, _ = other.TryLockContext(ctx)
		}
		if took := time.Since(start); took > 11*time.Second {
			t.Errorf("another owner got the mutex only %v after a hold on a fixed 10s lease was taken", took.Round(100*time.Millisecond))
		}
		other.Unlock()
		time.Sleep(time.Minute)
	})
}
