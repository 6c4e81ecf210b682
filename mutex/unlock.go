package mutex

import (
	"context"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
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
	m.h.MustUnlock(core.Exclusive, m.release, m.forget)
}

// UnlockContext releases one hold of ctx's owner, through any handle of
// the process on the same server, or with no owner in ctx, the oldest
// ownerless hold taken through m. The owner keeps the mutex until it has
// released as many holds as it took.
//
// The release does not depend on ctx's cancellation: an unlock deferred
// with a context that has ended still releases. Nor does it depend on
// ctx's deadline: it is bounded by a few seconds of its own and by the
// hold's lease (a release past it finds the hold expired). If it fails,
// the error matches context.DeadlineExceeded when that bound passed, the
// watchdog stops, so the hold expires by itself within one lease, and
// Done is closed.
//
// It returns an error matching dsync.ErrNotHeld, without any I/O, when the
// owner holds nothing through this process: never locked, unlocked once too
// often, or locked by another owner, whose hold stays intact. It returns
// one too when the hold was lost.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	err, _ := m.h.Unlock(ctx, core.Exclusive, m.release, m.forget)
	return err
}

// release runs one release of owner's hold l (see core.Handle.Release),
// carrying the waiters of this process queued behind the hold on its
// first attempt.
func (m *Mutex) release(ctx context.Context, owner string, l *lease.Lease) (left int64, err error) {
	op := dsync.NewID()
	h, queued := m.takeQueued(l)
	args := make([]any, 0, 8+len(queued))
	args = append(args, owner, op, core.RestoredLease(l), m.channel, core.Ms(m.h.Cfg.FenceTTL), hub.Process(), core.Ms(waiterTTL), "")
	for _, e := range queued {
		args = append(args, e)
	}
	defer func() {
		settle(h, err == nil && left > 0)
		if err != nil || left <= 0 {
			m.forget(l)
		}
	}()
	keys := []string{m.h.Key, m.waiters, m.fence}
	return m.h.Release(ctx, core.Exclusive, owner, l, func(ctx context.Context, first bool, holds string) (wait.Reply, error) {
		args[7] = holds
		if !first {
			// Only the first attempt carries the queued waiters: had a
			// retry registered them again, an entry its waiter removed
			// since (having found the mutex its own) would come back.
			// If that attempt failed, HandOff woke them, and they ask
			// the server themselves.
			return wait.HandOff(ctx, m.h.B, m.channel, releaseScript, m.handedFrom(h), keys, args[:8]...)
		}
		r, err := wait.HandOff(ctx, m.h.B, m.channel, releaseScript, m.handedFrom(h), keys, args...)
		if len(queued) > 0 {
			registered(h)
		}
		return r, err
	})
}
