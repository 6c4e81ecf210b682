package multilock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// scopeLease is the members' watchdog lease in the scope tests: a deleted
// member is found at its next renewal, a third of it later, plus a round
// trip.
const scopeLease = 600 * time.Millisecond

// scopeMembers returns n mutexes with the scope tests' lease, and their
// keys.
func scopeMembers(t *testing.T, srv *testserver.Server, n int) ([]dsync.Locker, []string) {
	b := srv.NewBackend(t)
	var ms []dsync.Locker
	var keys []string
	for range n {
		name := "scope:" + dsync.NewID()[:8]
		ms = append(ms, mutex.New(b, name, mutex.WithWatchdog(scopeLease), mutex.WithLogger(nil)))
		keys = append(keys, "dsync:mutex:{"+name+"}")
	}
	return ms, keys
}

// TestLockScopeEndsWhenMemberDeleted: All's scope ends within the
// lost-signal bound when one member's key is deleted, RedLock's when a
// majority's are and not before, each with a cause matching
// dsync.ErrNotHeld that names the members lost.
func TestLockScopeEndsWhenMemberDeleted(t *testing.T) {
	t.Parallel()
	bound := scopeLease/3 + 200*time.Millisecond
	for _, c := range []struct {
		name  string
		lock  func(...dsync.Locker) *multilock.Lock
		n     int
		spare int // members whose loss the group survives
	}{
		{"All", multilock.All, 2, 0},
		{"RedLock", multilock.RedLock, 3, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := testserver.Real(t)
			ms, keys := scopeMembers(t, srv, c.n)
			ctx, unlock, err := c.lock(ms...).LockScope(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys[:c.spare] {
				if _, err := srv.Do(context.Background(), "DEL", k); err != nil {
					t.Fatal(err)
				}
			}
			if c.spare > 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("scope ended with %d of %d members lost: %v", c.spare, c.n, context.Cause(ctx))
				case <-time.After(bound):
				}
			}
			t0 := time.Now()
			if _, err := srv.Do(context.Background(), "DEL", keys[c.spare]); err != nil {
				t.Fatal(err)
			}
			took := testserver.ScopeLost(t, ctx, t0, bound, "the group was lost (lost: member ")
			t.Logf("scope ended %v after the DEL (bound %v): %v", took.Round(time.Millisecond), bound, context.Cause(ctx))
			if err := unlock(); c.spare == 0 && !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("unlock after the loss: %v, want ErrNotHeld", err)
			}
		})
	}
}

// TestLockScopeReleased: unlock ends the scope's context with
// context.Canceled before it returns, frees every member, and a second
// unlock changes nothing.
func TestLockScopeReleased(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	ms, _ := scopeMembers(t, srv, 2)
	l := multilock.All(ms...)
	ctx, unlock, err := l.LockScope(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tokens, err := l.Tokens(ctx); err != nil || tokens[0] <= 0 || tokens[1] <= 0 {
		t.Errorf("Tokens with the scope's context: %v, %v", tokens, err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	testserver.ScopeReleased(t, ctx)
	for i, m := range ms {
		if !free(t, m) {
			t.Errorf("member %d held after unlock", i)
		}
	}
	if err := unlock(); err != nil {
		t.Errorf("second unlock: %v, want the first's nil", err)
	}
}
