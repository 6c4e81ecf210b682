package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// scopeLease is the watchdog lease of the scope tests: a deleted hold is
// found at the next renewal, a third of it later, plus a round trip.
const scopeLease = 600 * time.Millisecond

// TestScopeEndsWhenKeysDeleted: for either side, the lock's keys deleted
// behind the holder's back end the scope's context within the lost-signal
// bound, with a cause matching dsync.ErrNotHeld that says the hold
// vanished.
func TestScopeEndsWhenKeysDeleted(t *testing.T) {
	t.Parallel()
	for _, side := range []string{"write", "read"} {
		t.Run(side, func(t *testing.T) {
			t.Parallel()
			srv := testserver.Real(t)
			name := "scope:" + dsync.NewID()[:8]
			m := rwlock.New(srv.NewBackend(t), name, rwlock.WithWatchdog(scopeLease), rwlock.WithLogger(nil))
			scope := m.LockScope
			if side == "read" {
				scope = m.RLockScope
			}
			ctx, unlock, err := scope(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			key := "dsync:rwlock:{" + name + "}"
			if _, err := srv.Do(context.Background(), "DEL", key, key+":readers", key+":rexpiry"); err != nil {
				t.Fatal(err)
			}
			bound := scopeLease/3 + 200*time.Millisecond
			took := testserver.ScopeLost(t, ctx, t0, bound, "hold no longer on the server")
			t.Logf("%s scope ended %v after the DEL (bound %v)", side, took.Round(time.Millisecond), bound)
			if err := unlock(); !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("unlock after the loss: %v, want ErrNotHeld", err)
			}
		})
	}
}

// TestScopeReleased: unlock ends the scope's context with
// context.Canceled before it returns, for either side, and frees the lock.
func TestScopeReleased(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	name := "scope:" + dsync.NewID()[:8]
	m := rwlock.New(b, name)
	wctx, wunlock, err := m.LockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A read scope with the write scope's owner downgrades; made without
	// the write scope's cancellation, it outlives it.
	rctx, runlock, err := m.RLockScope(context.WithoutCancel(wctx))
	if err != nil {
		t.Fatalf("RLockScope with the write scope's owner: %v", err)
	}
	if err := wunlock(); err != nil {
		t.Fatal(err)
	}
	testserver.ScopeReleased(t, wctx)
	if rctx.Err() != nil {
		t.Fatal("the write scope's unlock ended the read scope it downgraded to")
	}
	if err := runlock(); err != nil {
		t.Fatal(err)
	}
	testserver.ScopeReleased(t, rctx)
	s, err := m.State(context.Background())
	if err != nil || s.Mode != rwlock.Free {
		t.Errorf("after both unlocks: %+v, %v; want free", s, err)
	}
}

// TestReadScopeRefusesUpgrade: the write lock asked for with a read
// scope's context is dsync.ErrUpgrade, as with RLockContext.
func TestReadScopeRefusesUpgrade(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	m := rwlock.New(srv.NewBackend(t), "scope:"+dsync.NewID()[:8])
	rctx, runlock, err := m.RLockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer runlock()
	if _, _, err := m.LockScope(rctx); !errors.Is(err, dsync.ErrUpgrade) {
		t.Errorf("LockScope with a read scope's context: %v, want ErrUpgrade", err)
	}
}
