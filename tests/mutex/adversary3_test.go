package mutex_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Third adversarial review: each test fails on 2779bdd for the defect
// named above it.

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
		const name = "adv3twoservers"
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

// TestAdv3OpMemoryMakesReentryTenTimesSlower: 2f610c6 raised the op
// memory from 64 ids to 1,000 and keeps each for 30s (an acquisition's for
// 30s plus the lease). An owner that re-enters a mutex it holds (nested
// calls, a loop under an outer lock) adds two ids per re-entry and release
// pair, so after about 500 pairs the hold's state string is ~44 KB, and
// every script on it (re-entry, release, renewal, State) GETs, parses with
// gmatch/match, rebuilds with table.concat and SETs all of it, inside the
// single-threaded server: the pair costs about ten times what it did (on
// this machine ~0.5ms before, ~5ms after), and the server is blocked for
// that time for every client. Before 2f610c6 the cost stayed flat.
func TestAdv3OpMemoryMakesReentryTenTimesSlower(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	name := adv2Name("adv3opmem")
	m := mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	if err := m.LockContext(o); err != nil {
		t.Fatal(err)
	}
	defer m.UnlockContext(o)
	pairs := func(n int) time.Duration {
		start := time.Now()
		for range n {
			if err := m.LockContext(o); err != nil {
				t.Fatal(err)
			}
			if err := m.UnlockContext(o); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / time.Duration(n)
	}
	pairs(20) // warm up: scripts loaded, connections dialled
	// Measure the early cost before the memory fills: start a fresh hold.
	m.UnlockContext(o)
	if err := m.LockContext(o); err != nil {
		t.Fatal(err)
	}
	early := pairs(50)
	pairs(550) // 1,100 ids: the memory is full
	late := pairs(50)
	n, _ := srv.Do(ctx, "STRLEN", "dsync:mutex:{"+name+"}")
	t.Logf("re-entry + release pair: %v at first, %v after 600 pairs; hold state %v bytes", early, late, n)
	if late > 4*early {
		t.Errorf("a re-entry + release pair costs %v after 600 pairs, %.1fx the %v it cost at first (hold state %v bytes): the op memory makes every script on a busy hold slow", late, float64(late)/float64(early), early, n)
	}
}

// TestAdv3PartialReleaseThroughWatchdogHandleExtendsFixedLease: 2f610c6
// made a partial release restore the lease only for a watchdog lease
// (core.Handle.RestoredLease), but it asks the releasing handle's options,
// not the hold's lease. Owner o takes the mutex through a handle with a
// fixed 10s lease and re-enters through a handle of the same process with a
// 10s watchdog (another component's); at 9s it releases once through the
// watchdog handle. The release restores 10s on the server, so the hold
// lives until 19s, while the lease o keeps is the fixed one, which
// nothing renews: Done reports it lost at 10s, o's later UnlockContext
// does no I/O (ErrNotHeld), and every other owner is shut out until 19s.
// This is TestAdv2PartialReleaseExtendsFixedLease through a second handle.
func TestAdv3PartialReleaseThroughWatchdogHandleExtendsFixedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "adv3fixedpartial"
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
