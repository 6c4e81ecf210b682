package fairlock

import (
	"context"
)

// Lock locks m for a fresh ownerless hold, as sync.Mutex does: it is not
// reentrant, and Unlock on m, from any goroutine, releases it. Lock waits
// its turn, riding out backend errors that may pass with capped backoff
// and logging at Warn while the server cannot be reached. It panics if the
// handle is invalid (see New) or its backend is closed.
func (m *Mutex) Lock() {
	m.h.MustLock(&m.spec)
}

// LockContext locks m for ctx's owner (see dsync.WithOwner), re-entering at
// once if the owner already holds it, and otherwise waits its turn: holds
// are granted in the order waiters reached the server. With no owner in
// ctx, it takes an ownerless hold as Lock does.
//
// The wait ends when the lock is acquired or ctx is done; ctx's deadline
// is the longest wait. On failure the waiter leaves the queue at once,
// nothing is left held, and the error matches ctx.Err(), or is the backend
// error that cannot pass. It returns at most half a second after ctx
// ends, as in package mutex.
func (m *Mutex) LockContext(ctx context.Context) error {
	return m.h.Lock(ctx, &m.spec)
}

// TryLockContext makes one attempt to lock m for ctx's owner, without
// waiting: it succeeds only if the owner holds the lock already, or the
// lock is free and no live waiter is queued. It reports whether the lock is
// now held by the owner.
func (m *Mutex) TryLockContext(ctx context.Context) (bool, error) {
	return m.h.TryLock(ctx, &m.spec)
}
