package mutex

import (
	"context"

	"github.com/dsyncgo/dsync/internal/core"
)

// Unlock releases the oldest ownerless hold taken through m by Lock (or by
// LockContext without an owner), from any goroutine, as sync.Mutex does.
//
// It panics if m has no such hold, as sync.Mutex does. A hold that was lost
// (its lease expired or it vanished from the server) is not a panic: the
// loss was reported through Done and is logged again here, and the lost
// hold is what this Unlock consumed, so a late Unlock never releases the
// next holder's hold. Every Lock must therefore be paired with one Unlock,
// lost or not. Backend errors that may pass are retried for a few seconds,
// at most until the lease would have expired anyway.
func (m *Mutex) Unlock() {
	m.h.MustUnlock(core.Exclusive, &m.release)
}

// UnlockContext releases one hold of ctx's owner taken through m's backend
// value, or with no owner in ctx, the oldest ownerless hold taken through
// m. The owner keeps the mutex until it has released as many holds as it
// took.
//
// The release does not depend on ctx's cancellation: an unlock deferred
// with a context that has ended still releases, bounded by a few seconds
// of its own and by the hold's lease (a release past it finds the hold
// expired). But UnlockContext returns by ctx's deadline plus 100ms (100ms
// after the call if ctx had ended already): if the outcome is not known
// by then, the error matches ctx.Err() and the release goes on in the
// background. If the release fails, the watchdog stops, so the hold
// expires by itself within one lease, and Done is closed.
//
// It returns an error matching dsync.ErrNotHeld, without any I/O, when the
// owner holds nothing through m's backend value: never locked, unlocked
// once too often, locked by another owner, whose hold stays intact, or
// locked through another backend value of the process, which the error
// says and through which the hold must be released. It returns one too
// when the hold was lost.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	err, _ := m.h.Unlock(ctx, core.Exclusive, &m.release)
	return err
}
