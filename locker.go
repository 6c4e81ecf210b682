package dsync

import "context"

// Locker is a lock whose every operation takes a context: the form that
// multilock composes and that every exclusive dsync primitive implements.
//
// The context bounds the call (its deadline is the longest LockContext will
// wait) and carries the owner (see WithOwner). Implementations must leave
// nothing held when LockContext or TryLockContext returns an error.
type Locker interface {
	// LockContext blocks until the lock is held by ctx's owner or ctx is
	// done, in which case it returns an error matching ctx.Err().
	LockContext(ctx context.Context) error
	// TryLockContext makes one attempt without waiting for a holder to
	// release. It reports false, with a nil error, when the lock is held by
	// another owner.
	TryLockContext(ctx context.Context) (bool, error)
	// UnlockContext releases one hold of ctx's owner. It returns an error
	// matching ErrNotHeld when the owner holds nothing.
	UnlockContext(ctx context.Context) error
}
