package fairlock

import (
	"context"

	"github.com/dsyncgo/dsync/internal/core"
)

// LockScope locks m as LockContext does and returns the hold as a
// context, cancelled when the hold ends, and unlock, which ends it, as
// mutex.Mutex.LockScope does: when the hold is lost, context.Cause of the
// context matches dsync.ErrNotHeld and says how; the context carries the
// hold's owner (ctx's, or a fresh one); unlock cancels it, then releases,
// once. On failure it returns LockContext's error and a nil context and
// function.
func (m *Mutex) LockScope(ctx context.Context) (context.Context, func() error, error) {
	return m.h.Scope(ctx, core.Exclusive, m.LockContext, m.UnlockContext)
}
