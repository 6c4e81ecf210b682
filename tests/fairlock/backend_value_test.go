package fairlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// The comment above each test describes the defect it pins; the test
// failed on 2779bdd, before the fix.

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
		m2 := fairlock.New(fake.FakeBackend(t, srv2), name, fairlock.WithLogger(nil))
		m1 := fairlock.New(fake.FakeBackend(t, srv1), name, fairlock.WithLogger(nil))
		other2 := fairlock.New(fake.FakeBackend(t, srv2), name, fairlock.WithLogger(nil))
		probe1 := fairlock.New(fake.FakeBackend(t, srv1), name, fairlock.WithLogger(nil))
		probe2 := fairlock.New(fake.FakeBackend(t, srv2), name, fairlock.WithLogger(nil))
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
