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

// TestReentryCostFlatWithOpMemory: 2f610c6 raised the op
// memory from 64 ids to 1,000 and keeps each for 30s (an acquisition's for
// 30s plus the lease). An owner that re-enters a mutex it holds (nested
// calls, a loop under an outer lock) adds two ids per re-entry and release
// pair, so after about 500 pairs the hold's state string was ~44 KB, and
// every script on it (re-entry, release, renewal, State) GETs, parses with
// gmatch/match, rebuilds with table.concat and SETs all of it, inside the
// single-threaded server: the pair cost about ten times what it did, and
// the server was blocked for that time for every client. The cost of each
// of those scripts is linear in the state's length, so the test pins the
// length: it stops growing (lib.lua keeps at most max_ops ids) and stays
// a few kilobytes, where it was tens of kilobytes and growing.
func TestReentryCostFlatWithOpMemory(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	name := uniqueName("opmem")
	m := mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	if err := m.LockContext(o); err != nil {
		t.Fatal(err)
	}
	defer m.UnlockContext(o)
	pairs := func(n int) int64 {
		for range n {
			if err := m.LockContext(o); err != nil {
				t.Fatal(err)
			}
			if err := m.UnlockContext(o); err != nil {
				t.Fatal(err)
			}
		}
		v, err := srv.Do(ctx, "STRLEN", "dsync:mutex:{"+name+"}")
		if err != nil {
			t.Fatal(err)
		}
		n64, _ := v.(int64)
		return n64
	}
	early := pairs(10)
	mid := pairs(300)
	late := pairs(300)
	t.Logf("hold state: %d bytes after 10 re-entry + release pairs, %d after 310, %d after 610", early, mid, late)
	const limit = 8 << 10
	if late > mid+mid/16 || late > limit {
		t.Errorf("hold state %d bytes after 610 pairs (%d after 310): want it to stop growing, within %d bytes; every script on a busy hold reads and rewrites it all", late, mid, limit)
	}
}

// TestRetriedReleaseAppliesOnce: a release whose reply is lost is
// retried with the same operation id, which the script recognises among
// the lock's 8 most recent ids (lib.lua recent_ops). When the same owner
// runs 8 operations meanwhile (re-entries by its other goroutines, over
// other connections), the id is forgotten and the retry releases a second
// hold: the owner's count on the server is one short, so the mutex is freed
// while one of its goroutines still holds it.
func TestRetriedReleaseAppliesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "retry"
		o := dsync.WithOwner(ctx)
		lb := &loseReply{Backend: fake.FakeBackend(t, srv)}
		m1 := mutex.New(lb, name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		for range 2 {
			if err := m1.LockContext(o); err != nil {
				t.Fatal(err)
			}
		}
		lb.during = func() {
			for range 8 { // other goroutines of o re-enter
				if err := m2.LockContext(o); err != nil {
					t.Error(err)
				}
			}
		}
		lb.armed.Store(true)
		if err := m1.UnlockContext(o); err != nil { // 2 + 8 - 1 holds left
			t.Fatal(err)
		}
		n, err := m2.HoldCount(o)
		if err != nil {
			t.Fatal(err)
		}
		if n != 9 {
			t.Errorf("o took 10 holds and released 1: HoldCount = %d, want 9; the retried release was applied twice", n)
		}
		for range 9 {
			m2.UnlockContext(o)
		}
		time.Sleep(time.Minute)
	})
}

// TestRetriedReleaseSparesNextHold: owner o's final release of hold H1
// frees the mutex, but its reply is lost. Before the retry (same operation
// id) lands, another goroutine of o takes the free mutex: a new hold H2,
// whose ops hold only H2's acquisition. The retry finds o at the key, does
// not find its id among H2's ops, and releases H2 as if it were H1: one
// unlock released two holds, and another owner takes the mutex while o's
// second goroutine is inside its critical section (it never unlocked). The
// release script checks the owner and the op memory but not the hold id,
// which the client knows (lease.ID) and which would tell H1 from H2.
func TestRetriedReleaseSparesNextHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "retryfree"
		o := dsync.WithOwner(ctx)
		lb := &loseReply{Backend: fake.FakeBackend(t, srv)}
		m1 := mutex.New(lb, name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		y := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil { // H1
			t.Fatal(err)
		}
		lb.during = func() {
			// Another goroutine of o takes the mutex, freed by the release.
			if ok, err := m2.TryLockContext(o); !ok || err != nil {
				t.Errorf("o's second goroutine: TryLock on the freed mutex = %v, %v", ok, err)
			}
		}
		lb.armed.Store(true)
		if err := m1.UnlockContext(o); err != nil { // releases H1 once
			t.Logf("UnlockContext of H1: %v", err)
		}
		// o took H1 and H2 and released H1 once: H2 is still o's.
		n, err := m2.HoldCount(o)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("o took two holds (H1, then H2 once H1 was freed) and released one: HoldCount = %d, want 1; the retried release of H1 released H2", n)
		}
		if ok, _ := y.TryLockContext(ctx); ok {
			t.Errorf("another owner acquired the mutex while o's second goroutine holds H2, which it never unlocked")
			y.Unlock()
		}
		m2.UnlockContext(o)
		time.Sleep(time.Minute)
	})
}

// TestRetriedReentryCountsOnceAfter64Ops: a re-entry whose reply is lost is
// retried with the same operation id, recognised among the hold's last 64
// ids (lib.lua max_ops). 32 lock/unlock pairs by other goroutines of the
// same owner meanwhile (64 operations) push the id out, and the retry
// counts a second re-entry: the owner's count on the server is one too
// high, so after as many unlocks as locks the mutex stays held, and the
// watchdog (whose lease is still active) renews it for ever.
func TestRetriedReentryCountsOnceAfter64Ops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "ops64"
		o := dsync.WithOwner(ctx)
		lb := &loseReply{Backend: fake.FakeBackend(t, srv)}
		m1 := mutex.New(lb, name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		other := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		lb.during = func() {
			for range 32 {
				if err := m2.LockContext(o); err != nil {
					t.Error(err)
				}
				if err := m2.UnlockContext(o); err != nil {
					t.Error(err)
				}
			}
		}
		lb.armed.Store(true)
		if err := m1.LockContext(o); err != nil { // re-entry, reply lost, retried
			t.Fatal(err)
		}
		n, err := m2.HoldCount(o)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("o holds 2 (1 + 1 re-entry; 32 lock/unlock pairs meanwhile): HoldCount = %d; the retried re-entry counted twice", n)
		}
		m1.UnlockContext(o)
		m1.UnlockContext(o)
		time.Sleep(time.Minute)
		if locked, _ := other.IsLocked(ctx); locked {
			t.Errorf("a minute after o unlocked as often as it locked, the mutex is still held (its watchdog renews it)")
			for range 3 {
				m2.UnlockContext(o)
			}
		}
		time.Sleep(time.Minute)
	})
}

// TestRetriedReentryCountsOnceAfterPartition: operation ids with a time are
// forgotten 30s after their last landing. A re-entry lands just before the
// link to the server is cut, its reply lost; the acquisition keeps
// retrying (Lock rides out outages) for 35s, which the hold, on a 2 min
// watchdog lease, survives. When the link heals, another goroutine of the
// same owner re-enters and unlocks first (the retry sleeps its backoff),
// and its re-entry prunes ids older than 30s, the lost re-entry's among
// them. The retry then lands as a new re-entry: o's count is one too high
// and the mutex is never freed. The comment in lib.lua assumes "an
// acquisition retries within a second of its last attempt, which
// refreshes its id": not when the attempts cannot reach the server.
func TestRetriedReentryCountsOnceAfterPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "partition"
		o := dsync.WithOwner(ctx)
		pb := &partitionAfter{Backend: fake.FakeBackend(t, srv), held: make(chan struct{})}
		m := mutex.New(pb, name, mutex.WithWatchdog(2*time.Minute), mutex.WithLogger(nil))
		other := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		pb.armed.Store(true)
		g1 := make(chan error, 1)
		go func() { g1 <- m.LockContext(o) }() // re-entry; its reply is lost
		time.Sleep(35 * time.Second)
		pb.cut.Store(false) // healed
		// Another goroutine of o: a nested lock and unlock.
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := m.UnlockContext(o); err != nil {
			t.Fatal(err)
		}
		close(pb.held) // the first goroutine's retry lands
		if err := <-g1; err != nil {
			t.Fatal(err)
		}
		n, err := m.HoldCount(o)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("o locked twice and re-entered once more with a matching unlock: HoldCount = %d, want 2; the retried re-entry counted twice", n)
		}
		m.UnlockContext(o)
		m.UnlockContext(o)
		if locked, _ := other.IsLocked(ctx); locked {
			t.Errorf("mutex still held after o unlocked as often as it locked")
			m.UnlockContext(o)
		}
		time.Sleep(3 * time.Minute)
	})
}
