package fairlock

import (
	"context"

	"github.com/dsyncgo/dsync/internal/core"
)

// Unlock releases the oldest ownerless hold taken through m, from any
// goroutine, as sync.Mutex does. It panics if m has no such hold. A hold
// that was lost is not a panic: the loss is logged, and the lost hold is
// what this Unlock consumed, so every Lock must be paired with one Unlock.
func (m *Mutex) Unlock() {
	m.h.MustUnlock(core.Exclusive, &m.release)
}

// UnlockContext releases one hold of ctx's owner taken through m's
// backend value, or with no owner in ctx, the oldest
// ownerless hold taken through m. The final release hands the lock to the
// head of the queue, in the same script.
//
// The release does not depend on ctx's cancellation and is bounded by a
// few seconds of its own and by the hold's lease; if it fails, the
// watchdog stops and the hold expires by itself. The call returns by
// ctx's deadline plus 100ms (see the package dsync documentation): if the
// outcome is not known by then, the error matches ctx.Err() and the
// release goes on in the background. It returns an error matching dsync.ErrNotHeld,
// without I/O, when the owner holds nothing through m's backend value (saying so when
// it holds through another), and one
// too when the hold was lost.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	err, _ := m.h.Unlock(ctx, core.Exclusive, &m.release)
	return err
}
