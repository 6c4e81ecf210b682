package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
)

// ReleaseTimeout bounds a release, whatever the caller's context: a
// release runs detached from the caller's cancellation, so that an unlock
// deferred in a request whose context has ended still releases.
const ReleaseTimeout = 5 * time.Second

// deadlineOnly is a context that can never be cancelled but has a
// deadline, past which a backend gives up the call.
type deadlineOnly struct {
	context.Context // never done
	deadline        time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.deadline, true }

// errGone is wrapped in the error about a hold that a release did not
// find on the server.
var errGone = errors.New("it is no longer on the server")

// Release runs one release of the hold l of owner, in role, through h's
// backend, and returns the owner's holds left. attempt sends the
// primitive's release script once (first is true for the first attempt),
// with the same operation id on every retry, naming the ids of the holds
// it may release (space-separated), and returns its reply: the holds left
// (-1 if the owner held none of those) and the id of the hold.
//
// The release does not depend on ctx's cancellation or deadline: it is
// bounded by ReleaseTimeout and by the end of l's lease (plus
// wait.SettleGrace), and errors that may pass are retried until then. A call still under way then is awaited
// for wait.SettleGrace more; its failure matches
// context.DeadlineExceeded. On failure the lease ends (renewals stop,
// Done closes) and the hold expires by itself on the server.
//
// l may be kept through another backend value of the process than h's;
// the outcome is applied to it only if the release reached the hold it
// keeps, which the hold id tells.
func (h *Handle) Release(ctx context.Context, role, owner string, l *lease.Lease, attempt func(ctx context.Context, first bool, holds string) (wait.Reply, error)) (int64, error) {
	l.BeginRelease()
	// Shortly past the lease's end the hold has expired on the server,
	// released or not: waiting longer for the reply tells nobody
	// anything. The grace lets a release sent just before the end, which
	// the server's later expiry leaves time for, learn its outcome.
	now := time.Now()
	deadline := now.Add(ReleaseTimeout)
	end := l.Deadline()
	if end.Before(now) {
		end = now
	}
	if end = end.Add(wait.SettleGrace); end.Before(deadline) {
		deadline = end
	}
	if ctx.Done() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
	} else {
		// A context that can never end stays one, with a deadline the
		// backend honours (backend rule 7): a cancellable call costs
		// more (redigo's, a goroutine per call).
		ctx = deadlineOnly{ctx, deadline}
	}
	// The holds the script may release: l's, or, when l is not known to
	// be on this server (Take's guess), any of the owner's in the
	// process, as the server has at most one of them.
	holds := l.ID()
	if !l.Reaches(h.B) {
		var ids []string
		for _, x := range lease.Anywhere(h.Key, owner, role) {
			ids = append(ids, x.ID())
		}
		holds = strings.Join(ids, " ")
	}
	ambiguous := false
	for failures := 1; ; failures++ {
		r, err := attempt(ctx, failures == 1, holds)
		if err == nil {
			if r.N < 0 && ambiguous && l.Reaches(h.B) {
				// An earlier attempt released the last hold: only a hold
				// known to be on this server can be said to be released.
				r = wait.Reply{N: 0, HoldID: l.ID()}
			}
			return h.settle(role, owner, l, r)
		}
		if !wait.Transient(err) || time.Now().After(deadline) {
			l.Release()
			return 0, err
		}
		ambiguous = true
		if !wait.Sleep(ctx, wait.Backoff(failures)) {
			l.Release()
			return 0, errors.Join(ctx.Err(), err)
		}
	}
}

// settle applies the reply of a release to the lease it concerns.
func (h *Handle) settle(role, owner string, l *lease.Lease, r wait.Reply) (int64, error) {
	if r.N < 0 {
		if l.Reaches(h.B) {
			l.Release()
			return r.N, fmt.Errorf("%w: %w: %w", dsync.ErrNotHeld, ErrLost, errGone)
		}
		// Another server, perhaps: the lease's own renewals will tell.
		l.Kept()
		return r.N, dsync.ErrNotHeld
	}
	target := l
	if r.HoldID != l.ID() {
		l.Kept()
		target = lease.ByID(h.Key, owner, role, r.HoldID)
		if target == nil {
			return r.N, nil
		}
		target.Reach(h.B)
		target.BeginRelease()
	} else {
		l.Reach(h.B)
	}
	if r.N == 0 {
		target.Release()
	} else {
		target.Kept()
	}
	return r.N, nil
}

// RestoredLease returns what a partial release of the hold kept by l
// restores its expiry to, in ms: the watchdog's lease, or 0 for a fixed
// lease, which a release never extends (its holder counts on it ending
// when it said), whatever the releasing handle's own options.
func RestoredLease(l *lease.Lease) int64 {
	if l.Renewed() {
		return Ms(l.TTL())
	}
	return 0
}

// Releaser runs one release of owner's hold l through the handle, usually
// with Handle.Release, and returns the owner's holds left.
type Releaser func(ctx context.Context, owner string, l *lease.Lease) (int64, error)

// Unlock releases one hold of role that ctx refers to (see Take) with
// release. lost, if not nil, is told of a hold found lost. It
// reports whether there was no hold at all to release, in which case it
// did no I/O.
func (h *Handle) Unlock(ctx context.Context, role string, release Releaser, lost func(l *lease.Lease)) (err error, none bool) {
	if err := h.Check(); err != nil {
		return err, false
	}
	owner, l := h.Take(ctx, role)
	if l == nil {
		return h.Wrap("unlock", dsync.ErrNotHeld), true
	}
	if !l.Releasable() {
		if lost != nil {
			lost(l)
		}
		return h.Wrap("unlock", fmt.Errorf("%w: %w", dsync.ErrNotHeld, ErrLost)), false
	}
	// A hold whose lease ran out less than the expiry margin ago may still
	// be on the server: releasing it spares the others the wait.
	_, err = release(ctx, owner, l)
	return h.Wrap("unlock", err), false
}

// MustUnlock is the sync.Locker form of Unlock, for the oldest ownerless
// hold: it panics on an invalid handle or when there is no hold to release,
// as sync.Mutex does, and logs any other failure, a lost hold included.
func (h *Handle) MustUnlock(role string, release Releaser, lost func(l *lease.Lease)) {
	err, none := h.Unlock(context.Background(), role, release, lost)
	if cerr := h.Check(); cerr != nil {
		panic("dsync/" + h.Kind + ": Unlock: " + cerr.Error())
	}
	if none {
		panic(fmt.Sprintf("dsync/%s: unlock of unlocked %s %q", h.Kind, h.Kind, truncate(h.Name)))
	}
	if err != nil {
		h.Cfg.Logger.Warn("dsync: unlock failed", "name", h.Name, "error", err)
	}
}
