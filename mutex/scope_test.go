package mutex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/mutex"
)

// scopeLease is the watchdog lease of the scope tests: a deleted hold is
// found at the next renewal, a third of it later, plus a round trip.
const scopeLease = 600 * time.Millisecond

// lostBound is how soon a scope must end after its key is deleted.
const lostBound = scopeLease/3 + 200*time.Millisecond

// TestLockScopeEndsWhenKeyDeleted: the key deleted behind the holder's
// back ends the scope's context within the lost-signal bound, with a cause
// matching dsync.ErrNotHeld that says the hold vanished; unlock then
// reports the loss, and again on a second call.
func TestLockScopeEndsWhenKeyDeleted(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	name := "scope:" + dsync.NewID()[:8]
	m := mutex.New(srv.NewBackend(t), name, mutex.WithWatchdog(scopeLease), mutex.WithLogger(nil))
	ctx, unlock, err := m.LockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("scope ended at once: %v", err)
	}
	t0 := time.Now()
	if _, err := srv.Do(context.Background(), "DEL", "dsync:mutex:{"+name+"}"); err != nil {
		t.Fatal(err)
	}
	took := testserver.ScopeLost(t, ctx, t0, lostBound, "hold no longer on the server")
	t.Logf("scope ended %v after the DEL (bound %v): %v", took.Round(time.Millisecond), lostBound, context.Cause(ctx))
	err = unlock()
	if !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock after the loss: %v, want ErrNotHeld", err)
	}
	if again := unlock(); again != err {
		t.Errorf("second unlock: %v, want the first's result %v", again, err)
	}
}

// TestLockScopeEndsOnForceUnlock: a ForceUnlock ends the scope of a holder
// in the process at once, and the cause says so.
func TestLockScopeEndsOnForceUnlock(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	name := "scope:" + dsync.NewID()[:8]
	m := mutex.New(b, name, mutex.WithLogger(nil))
	ctx, unlock, err := m.LockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	t0 := time.Now()
	if ok, err := mutex.New(b, name).ForceUnlock(context.Background()); !ok || err != nil {
		t.Fatalf("ForceUnlock: %v, %v", ok, err)
	}
	testserver.ScopeLost(t, ctx, t0, time.Second, "taken by ForceUnlock")
}

// TestLockScopeEndsWhenFixedLeaseRunsOut: on a fixed lease the scope ends
// a margin before the lease runs out on the server, and says it expired.
func TestLockScopeEndsWhenFixedLeaseRunsOut(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	const lease = 300 * time.Millisecond
	m := mutex.New(srv.NewBackend(t), "scope:"+dsync.NewID()[:8], mutex.WithLease(lease), mutex.WithLogger(nil))
	// The scope ends the expiry margin (1% of the lease + 2ms: 5ms)
	// before the lease; a timer that the machine runs late is the
	// machine's, and the meter times how late. Half the margin is left
	// for the lock's round trip, so that a scope ending at the expiry
	// fails on an idle machine.
	const margin = lease/100 + 2*time.Millisecond
	trips := tripmeter.Start(t, context.Background(), srv.NewBackend(t))
	t0 := time.Now()
	ctx, unlock, err := m.LockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	took := testserver.ScopeLost(t, ctx, t0, lease+time.Second, "lease expired")
	if late := trips.Stop(); took > lease-margin/2+late {
		t.Errorf("scope ended %v after the lock: a %v lease less half its %v margin, and the %v the machine was seen to lag, is %v",
			took, lease, margin, late, lease-margin/2+late)
	}
}

// TestLockScopeReleased: unlock ends the scope's context before it
// returns, with context.Canceled, and frees the mutex; a second unlock
// releases nothing, not even a hold taken since by another owner.
func TestLockScopeReleased(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	name := "scope:" + dsync.NewID()[:8]
	m := mutex.New(b, name)
	ctx, unlock, err := m.LockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	testserver.ScopeReleased(t, ctx)
	other := mutex.New(b, name)
	octx := dsync.WithOwner(context.Background())
	if ok, err := other.TryLockContext(octx); !ok || err != nil {
		t.Fatalf("another owner after unlock: %v, %v; want the mutex free", ok, err)
	}
	if err := unlock(); err != nil {
		t.Errorf("second unlock: %v, want the first's nil", err)
	}
	if n, err := other.HoldCount(octx); n != 1 || err != nil {
		t.Errorf("the other owner's holds after a second unlock: %d, %v; want 1", n, err)
	}
	other.UnlockContext(octx)
}

// TestLockScopeCarriesOwner: the scope's context carries the hold's
// owner: acquisitions with it re-enter, Token finds the hold, a nested
// scope's unlock leaves the outer hold, and ending the caller's ctx ends
// the scope's context but releases nothing.
func TestLockScopeCarriesOwner(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	name := "scope:" + dsync.NewID()[:8]
	m := mutex.New(b, name)
	parent, cancel := context.WithCancel(context.Background())
	ctx, unlock, err := m.LockScope(parent)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dsync.OwnerFrom(ctx); !ok {
		t.Fatal("the scope's context carries no owner")
	}
	if tok, err := m.Token(ctx); tok <= 0 || err != nil {
		t.Errorf("Token with the scope's context: %d, %v", tok, err)
	}
	inner, innerUnlock, err := m.LockScope(ctx)
	if err != nil {
		t.Fatalf("nested LockScope: %v", err)
	}
	if n, _ := m.HoldCount(ctx); n != 2 {
		t.Errorf("holds after a nested scope: %d, want 2 (re-entered)", n)
	}
	if err := innerUnlock(); err != nil {
		t.Fatal(err)
	}
	testserver.ScopeReleased(t, inner)
	if ctx.Err() != nil {
		t.Fatal("the nested scope's unlock ended the outer scope")
	}
	cancel()
	<-ctx.Done()
	if n, err := m.HoldCount(context.WithoutCancel(ctx)); n != 1 || err != nil {
		t.Errorf("holds after the caller's ctx ended: %d, %v; want 1 (kept until unlock)", n, err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if locked, err := m.IsLocked(context.Background()); locked || err != nil {
		t.Errorf("locked after unlock: %v, %v", locked, err)
	}
}
