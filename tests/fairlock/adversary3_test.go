package fairlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Third adversarial review: each test fails on 2779bdd for the defect
// named above it.

// TestAdv3UnlockThroughNewBackendRefusedOnOtherServersHoldID: the fairlock
// form of the mutex test of the same name (tests/mutex/adversary3_test.go).
// Owner o holds the lock on server 2, then on server 1; an unlock through a
// handle on server 2 with a backend value of its own sends server 1's hold
// id (core.Take picks the newest of lease.Anywhere), server 2 replies -1,
// and o's hold there cannot be released through that handle at all.
func TestAdv3UnlockThroughNewBackendRefusedOnOtherServersHoldID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv1, srv2 := fake.Fake(t), fake.Fake(t)
		ctx := context.Background()
		const name = "adv3twoservers"
		o := dsync.WithOwner(ctx)
		m2 := fairlock.New(fake.FakeBackend(t, srv2), name, fairlock.WithLogger(nil))
		m1 := fairlock.New(fake.FakeBackend(t, srv1), name, fairlock.WithLogger(nil))
		other2 := fairlock.New(fake.FakeBackend(t, srv2), name, fairlock.WithLogger(nil))
		probe2 := fairlock.New(fake.FakeBackend(t, srv2), name, fairlock.WithLogger(nil))
		if err := m2.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := other2.UnlockContext(o); err != nil {
			t.Errorf("UnlockContext(o) through a handle on server 2, where o holds the lock = %v; want nil", err)
		}
		if locked, err := probe2.IsLocked(ctx); err != nil || locked {
			t.Errorf("server 2 after o's unlock through a handle on it: locked = %v, %v; want free", locked, err)
		}
		m1.UnlockContext(o)
		m2.UnlockContext(o)
		time.Sleep(time.Minute)
	})
}
