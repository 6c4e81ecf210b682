package mutex

import (
	"context"
	"time"

	"github.com/dsyncgo/dsync/internal/core"
)

// Lock locks m for a fresh ownerless hold, as sync.Mutex does: it is not
// reentrant, and Unlock on m, from any goroutine, releases it. Lock blocks
// until the mutex is acquired, riding out backend errors that may pass
// (connection failures, a restarting server) with capped backoff, and
// logging at Warn while the server cannot be reached. It panics if the
// handle is invalid (see New) or its backend is closed.
func (m *Mutex) Lock() {
	m.h.MustLock(&m.spec)
}

// LockContext locks m for ctx's owner (see dsync.WithOwner), re-entering if
// the owner already holds it, and waits while another owner holds it. With
// no owner in ctx, it takes an ownerless hold as Lock does.
//
// The wait ends when the mutex is acquired or ctx is done; ctx's deadline
// is the longest wait. Backend errors that may pass are retried until then.
// On failure nothing is left held or queued, and the error matches
// ctx.Err(), or is the backend error that cannot pass.
//
// An attempt on the server when ctx ends is still awaited briefly: the
// script runs whether or not its reply is read, and must not land after
// the clean-up. LockContext reports success if that attempt acquired the
// mutex. Either way it returns at most half a second after ctx ends, even
// on a stalled server: a clean-up the server has not answered by then
// goes on in the background, bounded by a few seconds, and a hold or
// registration it could not undo expires by itself. A failure past ctx's
// deadline matches context.DeadlineExceeded, after a cancellation
// context.Canceled.
func (m *Mutex) LockContext(ctx context.Context) error {
	return m.h.Lock(ctx, &m.spec)
}

// TryLockContext makes one attempt to lock m for ctx's owner, without
// waiting for another holder to release. It reports whether the mutex is
// now held by the owner. When the attempt fails with an error, nothing is
// left held. As with LockContext, it returns at most half a second after
// ctx ends.
func (m *Mutex) TryLockContext(ctx context.Context) (bool, error) {
	return m.h.TryLock(ctx, &m.spec)
}

// handedLease returns the lease of a hold handed to a waiter by a release:
// at most core.HandoffLease. The mutex's waiters register for waiterTTL,
// not a waiter timeout, so that bounds it alone. A live waiter takes the
// hold without another round trip if it was handed over within half of
// it of the waiter's last attempt.
func (m *Mutex) handedLease() time.Duration {
	return min(m.h.Cfg.Lease, core.HandoffLease)
}
