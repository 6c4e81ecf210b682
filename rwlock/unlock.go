package rwlock

import (
	"context"

	"github.com/dsyncgo/dsync/internal/core"
)

// Unlock releases the oldest ownerless write hold taken through m, from
// any goroutine, as sync.RWMutex does. It panics if m has no such hold. A
// hold that was lost is not a panic: the loss is logged, and the lost hold
// is what this Unlock consumed.
func (m *RWMutex) Unlock() {
	m.h.MustUnlock(core.Exclusive, &m.wrelease)
}

// RUnlock releases the oldest ownerless read hold taken through m, as
// Unlock does for write holds.
func (m *RWMutex) RUnlock() {
	m.h.MustUnlock(read, &m.rrelease)
}

// UnlockContext releases one write hold of ctx's owner taken through
// m's backend value, or with no owner in ctx, the oldest
// ownerless write hold taken through m. The final release hands the lock
// to every waiting reader, or if none waits, to the writer at the head of
// the queue, in the same script. An owner that also holds a read hold
// (a downgrade) keeps it.
//
// The release does not depend on ctx's cancellation and is bounded by a
// few seconds of its own and by the hold's lease; if it fails, the
// watchdog stops and the hold expires by itself. The call returns by
// ctx's deadline plus 100ms (see the package dsync documentation): if the
// outcome is not known by then, the error matches ctx.Err() and the
// release goes on in the background. It returns an error matching dsync.ErrNotHeld,
// without I/O, when the owner holds no write hold through m's backend value (a
// read hold is released by RUnlockContext), and one too when the hold was
// lost.
func (m *RWMutex) UnlockContext(ctx context.Context) error {
	err, _ := m.h.Unlock(ctx, core.Exclusive, &m.wrelease)
	return err
}

// RUnlockContext releases one read hold of ctx's owner, as UnlockContext
// does a write hold. The last read hold of the lock hands it to the
// writer at the head of the queue. It returns an error matching
// dsync.ErrNotHeld when the owner holds no read hold.
func (m *RWMutex) RUnlockContext(ctx context.Context) error {
	err, _ := m.h.Unlock(ctx, read, &m.rrelease)
	return err
}
