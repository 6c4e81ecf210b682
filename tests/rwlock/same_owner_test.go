package rwlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// TestSameOwnerReadersHandedTogether: two goroutines of one owner
// (one request reading in parallel) both wait for a read hold behind a
// writer. The write release hands the lock to both in one script: the first
// entry starts owner o's read hold (hold id = its op id), the second is "one
// more hold" of it (pass_on's re-entry branch, rw.lua), count 2. But the
// waiter's fast path (core.Lock's Granted, internal/core/acquire.go) records
// the second grant as a fresh hold with its own op id as the hold id, which
// the server never had: core.Keep finds no lease by that id and
// lease.Start replaces the first goroutine's lease (same key, owner, role)
// with one naming the unknown id. Its first renewal finds "no such hold":
// RDone closes, the real hold (on its 2s hand-off lease) is never renewed
// and expires, and both RUnlockContext calls return ErrNotHeld. The owner
// loses its read lock within seconds of getting it, while the contract says
// a watchdog read hold is kept until released.
func TestSameOwnerReadersHandedTogether(t *testing.T) {
	// Which of the two grants is kept last depends on goroutine scheduling;
	// the defect shows when it is the second entry's: try a few rounds.
	for round := range 10 {
		failed := false
		synctest.Test(t, func(t *testing.T) {
			srv := fake.Fake(t)
			ctx := context.Background()
			w := rwlock.New(fake.FakeBackend(t, srv), "sameowner", rwlock.WithLogger(nil))
			r := rwlock.New(fake.FakeBackend(t, srv), "sameowner", rwlock.WithLogger(nil))
			o := dsync.WithOwner(ctx)
			w.Lock()
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range 2 {
				wg.Go(func() { errs[i] = r.RLockContext(o) })
			}
			synctest.Wait()
			if st, err := w.State(ctx); err != nil || st.WaitingReaders != 2 {
				t.Fatalf("want 2 waiting readers, got %+v, %v", st, err)
			}
			w.Unlock()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("reader %d: %v", i, err)
				}
			}
			if st, err := r.State(o); err != nil || st.ReadCount != 2 {
				t.Errorf("after the hand-off: %+v, %v; want o's read count 2", st, err)
			}
			// Let the watchdog renew a few times (30s lease, renewed every 10s).
			time.Sleep(45 * time.Second)
			if st, err := r.State(o); err != nil || st.ReadCount != 2 {
				failed = true
				t.Errorf("round %d: 45s after the hand-off, with the watchdog on: %+v, %v; want o's read count 2 (its read hold was never renewed and expired)", round, st, err)
			}
			select {
			case <-r.RDone(o):
				failed = true
				t.Errorf("round %d: RDone of owner o closed 45s after both its goroutines were handed the read lock (watchdog on): the lease kept for o names the second waiter's op id, not the hold id the server has, and its renewal found it gone", round)
			default:
			}
			for i := range 2 {
				if err := r.RUnlockContext(o); err != nil {
					failed = true
					t.Errorf("round %d: RUnlockContext(o) #%d of 2 = %v; want nil (o was granted 2 read holds)", round, i+1, err)
				}
			}
			w.ForceUnlock(ctx)
			time.Sleep(time.Minute)
		})
		if failed {
			return
		}
	}
}

// TestUpgradeIgnoresReadHoldOnAnotherServer: owner o holds a
// read hold of "x" on server 2 only. On server 1, where o holds nothing,
// LockContext(o) is refused with ErrUpgrade: RWMutex.upgrade checks
// lease.Anywhere, every hold of the process for the key, whatever its
// server. The core tells servers apart by hold id everywhere else (see
// tests/mutex/backend_value_test.go); the contract refuses an owner "that
// holds only a read hold" of the lock, and o holds none of server 1's.
func TestUpgradeIgnoresReadHoldOnAnotherServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv1, srv2 := fake.Fake(t), fake.Fake(t)
		ctx := context.Background()
		o := dsync.WithOwner(ctx)
		m2 := rwlock.New(fake.FakeBackend(t, srv2), "x", rwlock.WithLogger(nil))
		m1 := rwlock.New(fake.FakeBackend(t, srv1), "x", rwlock.WithLogger(nil))
		if err := m2.RLockContext(o); err != nil {
			t.Fatal(err)
		}
		err := m1.LockContext(o)
		if errors.Is(err, dsync.ErrUpgrade) {
			t.Errorf("LockContext(o) on server 1, where o holds nothing = %v; o's only read hold is on server 2", err)
		} else if err != nil {
			t.Error(err)
		} else {
			m1.UnlockContext(o)
		}
		ok, err := m1.TryLockContext(o)
		if errors.Is(err, dsync.ErrUpgrade) {
			t.Errorf("TryLockContext(o) on server 1, where o holds nothing = %v, %v", ok, err)
		} else if ok {
			m1.UnlockContext(o)
		}
		m2.RUnlockContext(o)
		time.Sleep(time.Minute)
	})
}
