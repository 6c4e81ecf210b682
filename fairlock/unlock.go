package fairlock

import (
	"context"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Unlock releases the oldest ownerless hold taken through m, from any
// goroutine, as sync.Mutex does. It panics if m has no such hold. A hold
// that was lost is not a panic: the loss is logged, and the lost hold is
// what this Unlock consumed, so every Lock must be paired with one Unlock.
func (m *Mutex) Unlock() {
	m.h.MustUnlock(core.Exclusive, m.release, nil)
}

// UnlockContext releases one hold of ctx's owner, through any handle of
// the process on the same server, or with no owner in ctx, the oldest
// ownerless hold taken through m. The final release hands the lock to the
// head of the queue, in the same script.
//
// The release does not depend on ctx's cancellation or deadline and is
// bounded by a few seconds of its own and by the hold's lease; if it fails, the watchdog stops and the hold
// expires by itself. It returns an error matching dsync.ErrNotHeld,
// without I/O, when the owner holds nothing through this process, and one
// too when the hold was lost.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	err, _ := m.h.Unlock(ctx, core.Exclusive, m.release, nil)
	return err
}

func (m *Mutex) release(ctx context.Context, owner string, l *lease.Lease) (int64, error) {
	op := dsync.NewID()
	return m.h.Release(ctx, core.Exclusive, owner, l, func(ctx context.Context, _ bool, holds string) (wait.Reply, error) {
		return wait.HandOff(ctx, m.h.B, m.channel, releaseScript, nil, m.keys(),
			owner, op, core.RestoredLease(l), m.channel, core.Ms(m.h.Cfg.FenceTTL), hub.Process(), holds)
	})
}
