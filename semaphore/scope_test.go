package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// scopeLease is the watchdog lease of the scope tests: deleted permits
// are found at the next renewal, a third of it later, plus a round trip.
const scopeLease = 600 * time.Millisecond

// TestAcquireScopeEndsWhenKeysDeleted: the semaphore's state deleted
// behind the holder's back ends the scope's context within the
// lost-signal bound, with a cause matching dsync.ErrNotHeld that says the
// permits vanished.
func TestAcquireScopeEndsWhenKeysDeleted(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	name := "scope:" + dsync.NewID()[:8]
	s := semaphore.New(srv.NewBackend(t), name, 3, semaphore.WithWatchdog(scopeLease), semaphore.WithLogger(nil))
	ctx, release, err := s.AcquireScope(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	key := "dsync:semaphore:{" + name + "}"
	if _, err := srv.Do(context.Background(), "DEL", key, key+":holders"); err != nil {
		t.Fatal(err)
	}
	bound := scopeLease/3 + 200*time.Millisecond
	took := testserver.ScopeLost(t, ctx, t0, bound, "hold no longer on the server")
	t.Logf("scope ended %v after the DEL (bound %v)", took.Round(time.Millisecond), bound)
	if err := release(); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("release after the loss: %v, want ErrNotHeld", err)
	}
}

// TestAcquireScopeReleased: release ends the scope's context with
// context.Canceled before it returns and gives back the scope's permits
// only: those the owner acquired besides with the scope's context stay.
func TestAcquireScopeReleased(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	s := semaphore.New(srv.NewBackend(t), "scope:"+dsync.NewID()[:8], 3)
	ctx, release, err := s.AcquireScope(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	oc := context.WithoutCancel(ctx) // the scope's owner
	if err := s.Acquire(oc, 1); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	testserver.ScopeReleased(t, ctx)
	if n, err := s.Available(context.Background()); n != 2 || err != nil {
		t.Errorf("available after the scope's release: %d, %v; want 2 (the owner's other permit kept)", n, err)
	}
	if err := release(); err != nil {
		t.Errorf("second release: %v, want the first's nil", err)
	}
	if err := s.Release(oc, 1); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireScopeBadPermits: n out of range is dsync.ErrInvalidPermits,
// before any I/O.
func TestAcquireScopeBadPermits(t *testing.T) {
	var calls atomic.Int64
	s := semaphore.New(&countingBackend{calls: &calls}, "scope", 3)
	for _, n := range []int64{0, -1, 4} {
		if ctx, release, err := s.AcquireScope(context.Background(), n); !errors.Is(err, dsync.ErrInvalidPermits) || ctx != nil || release != nil {
			t.Errorf("AcquireScope(%d): %v, %v, %v; want ErrInvalidPermits and nothing else", n, ctx, release != nil, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d backend calls, want none", n)
	}
}
