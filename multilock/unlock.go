package multilock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dsyncgo/dsync"
)

// Unlock releases the oldest ownerless hold of the group. It panics if
// there is none, as sync.Mutex does, and logs a member's failure to
// release.
func (l *Lock) Unlock() {
	err := l.UnlockContext(context.Background())
	if l.err != nil || errors.Is(err, errNoHold) {
		panic(fmt.Sprint("multilock: unlock of unlocked lock: ", err))
	}
	if err != nil {
		slog.Default().Warn("dsync: multilock unlock failed", "error", err)
	}
}

// errNoHold is wrapped, with dsync.ErrNotHeld, by an unlock that found no
// hold of the group.
var errNoHold = errors.New("the owner does not hold the group")

// UnlockContext releases one hold of the group by ctx's owner (or, with
// no owner in ctx, the oldest ownerless hold): every member it acquired,
// in parallel, with the member's UnlockContext on ctx (carrying the group
// hold's owner), as a direct unlock would. With dsync's locks as members,
// the release does not depend on ctx's cancellation, but the call returns
// by ctx's deadline plus 100ms (100ms after the call if ctx had ended
// already): a member whose outcome is not known by then reports an error
// matching ctx.Err(), and its release goes on in the background (see the
// package dsync documentation). It returns an error matching
// dsync.ErrNotHeld, without I/O, when the owner does not hold the group,
// and the members' errors joined (ErrNotHeld for a member that was lost)
// when a release failed or was not known to succeed in time: for All, any
// member's; for RedLock, only when fewer than a majority of the members
// were released (the others' leases run out by themselves).
func (l *Lock) UnlockContext(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	oc, h := l.take(ctx)
	if h == nil {
		return fmt.Errorf("multilock: unlock: %w: %w", dsync.ErrNotHeld, errNoHold)
	}
	h.mu.Lock()
	h.stopped = true
	started := h.started
	h.mu.Unlock()
	close(h.stop)
	if started {
		<-h.gone
	}
	errs := l.releaseEach(ownedBy{ctx, oc}, h.held)
	h.end()
	released := 0
	for i, err := range errs {
		if h.held[i] && err == nil {
			released++
		}
	}
	if err := errors.Join(errs...); err != nil && (!l.redlock || released < l.quorum) {
		return fmt.Errorf("multilock: unlock: %w", err)
	}
	return nil
}

// release unlocks the held members in parallel, with ctx, and returns
// their errors joined. A member's release does not depend on ctx's
// cancellation, but returns by its deadline (100ms after the call if ctx
// has ended), going on in the background: a failed acquisition that
// gives back what it took keeps ctx's deadline.
func (l *Lock) release(ctx context.Context, held []bool) error {
	return errors.Join(l.releaseEach(ctx, held)...)
}

// releaseEach unlocks the held members in parallel with ctx, and returns
// each member's error.
func (l *Lock) releaseEach(ctx context.Context, held []bool) []error {
	errs := make([]error, len(held))
	each(len(held), func(i int) bool { return held[i] }, func(i int) {
		errs[i] = l.members[i].UnlockContext(ctx)
	})
	return errs
}
