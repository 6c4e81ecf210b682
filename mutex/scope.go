package mutex

import (
	"context"

	"github.com/dsyncgo/dsync/internal/core"
)

// LockScope locks m as LockContext does and returns the hold as a
// context: one derived from ctx, carrying the hold's owner, that is
// cancelled when the hold ends, and unlock, which ends it. Work done with
// the context stops when the mutex is lost, as every callee that takes a
// ctx already stops when its ctx does:
//
//	ctx, unlock, err := m.LockScope(ctx)
//	if err != nil {
//		return err
//	}
//	defer unlock()
//	return work(ctx) // stops if the mutex is lost
//
// When the hold is lost (a renewal found it gone, ForceUnlock took it,
// renewals failed until the lease ran out, a fixed lease ran out),
// context.Cause(ctx) is an error matching dsync.ErrNotHeld that says
// which; after unlock, or when ctx itself ends, it is ctx's cause
// (context.Canceled after unlock).
//
// The owner is ctx's (see dsync.WithOwner), or, with none in ctx, a fresh
// one that the returned context carries: acquisitions made with it
// re-enter, Token and Done with it find the hold, and unlock releases
// exactly this hold, from any goroutine. Ending ctx cancels the returned
// context but releases nothing: call unlock, always. unlock cancels the
// context first, then releases as UnlockContext does, bounded by the
// release's own few seconds rather than a ctx; it returns the release's
// error (matching dsync.ErrNotHeld if the hold was lost). Calls after the
// first do nothing and return the first's result. No goroutine is kept
// per scope.
//
// On failure, LockScope returns LockContext's error and a nil context and
// function.
func (m *Mutex) LockScope(ctx context.Context) (context.Context, func() error, error) {
	return m.h.Scope(ctx, core.Exclusive, m.LockContext, m.UnlockContext)
}
