package fairlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// scopeLease is the watchdog lease of the scope tests: a deleted hold is
// found at the next renewal, a third of it later, plus a round trip.
const scopeLease = 600 * time.Millisecond

// TestLockScopeEndsWhenKeyDeleted: the key deleted behind the holder's
// back ends the scope's context within the lost-signal bound, with a cause
// matching dsync.ErrNotHeld that says the hold vanished.
func TestLockScopeEndsWhenKeyDeleted(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	name := "scope:" + dsync.NewID()[:8]
	m := fairlock.New(srv.NewBackend(t), name, fairlock.WithWatchdog(scopeLease), fairlock.WithLogger(nil))
	ctx, unlock, err := m.LockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := srv.Do(context.Background(), "DEL", "dsync:fairlock:{"+name+"}"); err != nil {
		t.Fatal(err)
	}
	bound := scopeLease/3 + 200*time.Millisecond
	took := testserver.ScopeLost(t, ctx, t0, bound, "hold no longer on the server")
	t.Logf("scope ended %v after the DEL (bound %v)", took.Round(time.Millisecond), bound)
	if err := unlock(); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock after the loss: %v, want ErrNotHeld", err)
	}
}

// TestLockScopeReleased: unlock ends the scope's context with
// context.Canceled before it returns, and the next waiter gets the lock.
func TestLockScopeReleased(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	name := "scope:" + dsync.NewID()[:8]
	ctx, unlock, err := fairlock.New(b, name).LockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	wctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 5*time.Second)
	defer cancel()
	next := fairlock.New(srv.NewBackend(t), name)
	go func() { got <- next.LockContext(wctx) }()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	testserver.ScopeReleased(t, ctx)
	if err := <-got; err != nil {
		t.Fatalf("the next waiter: %v", err)
	}
	next.UnlockContext(wctx)
	if err := unlock(); err != nil {
		t.Errorf("second unlock: %v, want the first's nil", err)
	}
}
