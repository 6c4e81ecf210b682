package testserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
)

// ScopeLost waits for a hold's scope (LockScope and the like), whose hold
// was taken from its holder at t0, to end, and fails t unless it ended
// within bound with ctx.Err() context.Canceled and a cause that matches
// dsync.ErrNotHeld and contains reason. It returns how long after t0 the
// scope ended.
func ScopeLost(t testing.TB, ctx context.Context, t0 time.Time, bound time.Duration, reason string) time.Duration {
	t.Helper()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
		t.Fatalf("the scope's context still on %v after its hold was taken", bound)
	}
	took := time.Since(t0)
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("ctx.Err() = %v, want context.Canceled", ctx.Err())
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, dsync.ErrNotHeld) || !strings.Contains(cause.Error(), reason) {
		t.Errorf("cause %q: want one matching dsync.ErrNotHeld that says %q", cause, reason)
	}
	return took
}

// ScopeReleased fails t unless a scope's context has ended with the cause
// of a release, context.Canceled.
func ScopeReleased(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("the scope's context still on after its release returned")
	}
	if cause := context.Cause(ctx); cause != context.Canceled {
		t.Errorf("cause %v after the release, want context.Canceled", cause)
	}
}
