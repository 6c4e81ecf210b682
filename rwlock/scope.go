package rwlock

import (
	"context"

	"github.com/dsyncgo/dsync/internal/core"
)

// LockScope write-locks m as LockContext does and returns the hold as a
// context, cancelled when the write hold ends, and unlock, which ends it,
// as mutex.Mutex.LockScope does: when the hold is lost, context.Cause of
// the context matches dsync.ErrNotHeld and says how; the context carries
// the hold's owner (ctx's, or a fresh one); unlock cancels it, then
// releases, once. On failure it returns LockContext's error and a nil
// context and function.
//
// To downgrade, take a read scope with the write scope's owner but not
// its cancellation, which would end the read scope's context with the
// write scope:
//
//	rctx, runlock, err := m.RLockScope(context.WithoutCancel(wctx))
//	wunlock() // rctx goes on: the read hold is kept
func (m *RWMutex) LockScope(ctx context.Context) (context.Context, func() error, error) {
	return m.h.Scope(ctx, core.Exclusive, m.LockContext, m.UnlockContext)
}

// RLockScope is LockScope for a read hold: it read-locks m as
// RLockContext does, and the context is cancelled when that read hold
// ends. Each owner's read hold has a lease of its own, so another
// reader's loss leaves it alone. A scope's owner that asks for the write
// lock with the context gets dsync.ErrUpgrade, as with RLockContext.
func (m *RWMutex) RLockScope(ctx context.Context) (context.Context, func() error, error) {
	return m.h.Scope(ctx, read, m.RLockContext, m.RUnlockContext)
}
