package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
)

// ReleaseTimeout bounds a release, whatever the caller's context: a
// release runs detached from the caller's cancellation, so that an unlock
// deferred in a request whose context has ended still releases.
const ReleaseTimeout = 5 * time.Second

// ReturnGrace is how long after its context's deadline a release call
// returns at the latest, or after the call itself when the context had
// ended already. A release whose outcome is not known by then goes on in
// the background. It is the documented 100ms (package dsync) less a
// margin for the timer and the scheduler, which took about 1ms more.
const ReturnGrace = 90 * time.Millisecond

// errGone is wrapped in the error about a hold that a release did not
// find on the server.
var errGone = errors.New("it is no longer on the server")

// errBackground is wrapped, with the caller's context error, in the error
// of a release call that returned before the release's outcome was known.
var errBackground = errors.New("the release goes on in the background")

// ReleaseSpec describes the releases of a primitive, as data that the
// core runs: the release script, called with Keys, the argument header
// (with the hold's owner, id and plain value, a fresh operation id and the
// lease a partial release restores) and Args. It replies with the owner's
// holds left on the server (-1 if it holds none of that hold) and the
// hold's id, prefixed with "!" if it refused the release and changed
// nothing (see codec.HandOffReply). A primitive makes it once per handle.
type ReleaseSpec struct {
	Script   *backend.Script
	Keys     []string
	Channel  string
	EntryTTL time.Duration
	Args     []any
	Fence    bool // Keys end with the fence key (see LockSpec.Fence)

	// ShortArgs, if set, replace Args for the release of a hold that
	// lasted less than Short since the session learned it held it (see
	// lease.Lease.Began): the mutex tells its script so (see pass_on in
	// exclusive.lua).
	ShortArgs []any
	Short     time.Duration

	// LookArgs, if set, replace ShortArgs once LookAfter has passed
	// since a release through the same session (any handle on the
	// primitive's main key) woke a waiter of another
	// session to try (wait.Reply.Woke), until a release made with them
	// frees the primitive (an inner release of a re-entered hold frees
	// nothing and looks at nobody): the mutex's release then looks at its queue even when no waiter
	// flagged the hold, and hands the mutex to a woken head that did not
	// come back when it was due.
	LookArgs  []any
	LookAfter time.Duration

	// Local makes the first attempt of a release carry, after Args, the
	// entries of the session's waiters queued behind the hold (see
	// LockSpec.Local), which the script registers.
	Local bool

	// Units, for a primitive whose holds count units (a semaphore's
	// permits), passes the units released as the script's first own
	// argument, before Args, and makes the plain value in the header the
	// one a plain hold of those units has (see LockSpec.PlainFields): the
	// units, then PlainFields. A release of all that a plain hold holds
	// finds it equal.
	Units       bool
	PlainFields []int64
}

// ReleaseOp returns a fresh operation id for a release, as a script
// argument: 63 random bits, which the scripts take as a string of decimal
// digits, as unique among an owner's recent operations as a 128-bit id and
// cheaper to make.
func ReleaseOp() any { return rand.Int64() }

// ErrRefused is what Release returns when the script refused the release
// (wait.Reply.Refused) and changed nothing; the hold is kept as it was.
var ErrRefused = errors.New("release refused")

// release runs one release of units (1, or a semaphore's permits) of the
// hold l through h's backend, with the arguments r.args (the header and
// rs.Args, then with rs.Local the entries carried by the first attempt,
// past r.fixed), and returns what the owner holds on the server after it.
//
// The release does not depend on ctx's cancellation: it is bounded by
// ReleaseTimeout and by the end of l's lease (plus wait.SettleGrace), and
// errors that may pass are retried until then. But the call returns by
// ctx's deadline plus ReturnGrace (or ReturnGrace after it was made, if
// ctx had ended already): an outcome not known by then is an error
// matching ctx.Err(), and the release goes on in the background. The
// outcome, whenever known, reaches the lease: it ends (renewals stop, Done
// closes) when the owner holds nothing more through h's session, or when
// the release failed, in which case the hold expires by itself on the
// server. A retry made once l ended restores no lease (see RestoredLease).
// The release was recorded (lease.Lease.BeginRelease), which read l's
// deadline.
func (r *release) start(ctx context.Context, deadline time.Time) (int64, error) {
	// Shortly past the lease's end the hold has expired on the server,
	// released or not: waiting longer for the reply tells nobody
	// anything. The grace lets a release sent just before the end, which
	// the server's later expiry leaves time for, learn its outcome.
	now := time.Now()
	r.bound, r.first = now.Add(ReleaseTimeout), true
	r.call = &r.firstCall
	r.call.Context = ctx
	if deadline.After(now) {
		now = deadline
	}
	if end := now.Add(wait.SettleGrace); end.Before(r.bound) {
		r.bound = end
	}
	by := r.bound
	if ctx.Err() != nil {
		by = time.Now().Add(ReturnGrace)
	} else if d, ok := ctx.Deadline(); ok {
		by = d.Add(ReturnGrace)
	}
	if by.After(r.bound) {
		by = r.bound
	}
	if left, err, done := r.run(by); done {
		return left, err
	}
	wait.Go(func() { r.run(r.bound) })
	cerr := ctx.Err()
	if cerr == nil {
		cerr = context.DeadlineExceeded
	}
	return 0, fmt.Errorf("%w: %w", cerr, errBackground)
}

// release is one release under way.
type release struct {
	h         *Handle
	rs        *ReleaseSpec
	l         *lease.Lease
	units     int64
	args      []any
	fixed     int                      // args past it are carried by the first attempt only
	buf       [codec.HeaderLen + 8]any // args, unless more
	call      *wait.DeadlineOnly       // the context of an attempt: the caller's values, a deadline
	firstCall wait.DeadlineOnly        // call, until an attempt fails
	look      int64                    // the look (see Handle.look) that args are rs.LookArgs for, or 0
	bound     time.Time                // past it, the release fails
	noLease   bool                     // args restore no lease
	first     bool                     // no attempt sent yet
	ambiguous bool                     // an attempt failed, not refused by the server: it may have been applied
	failures  int
	cause     error // the last failure other than a timeout
}

// attempt sends the release script once, and returns its reply.
func (r *release) attempt() (wait.Reply, error) {
	args := r.args
	if !r.first {
		args = args[:r.fixed]
	}
	first := r.first
	r.first = false
	rep, err := r.h.HandOff(r.call, r.rs.Channel, r.rs.Script, r.rs.Keys, args...)
	if first && len(args) > r.fixed {
		r.l.Carried()
	}
	if err == nil && strings.HasPrefix(rep.HoldID, "!") {
		rep.HoldID, rep.Refused = rep.HoldID[1:], true
	}
	return rep, err
}

// run makes attempts until one succeeds, one fails for good, or until
// passes, and reports whether the release ended, and how.
func (r *release) run(until time.Time) (left int64, err error, done bool) {
	for {
		if r.first {
			r.call.Until = until
		} else {
			// The backend may still read the failed attempt's context
			// and arguments (see backend.Backend): the next has its own.
			r.call = &wait.DeadlineOnly{Context: r.call.Context, Until: until}
			if !r.noLease && r.l.Ended() {
				// Its lease ended since the first attempt: what is left
				// of the hold expires when the server was to expire it.
				r.args = slices.Clone(r.args)
				r.args[codec.Lease] = noLease
				r.noLease = true
			}
		}
		rep, err := r.attempt()
		if err == nil {
			return r.settle(rep)
		}
		now := time.Now()
		timedOut := errors.Is(err, context.DeadlineExceeded)
		if !timedOut {
			r.cause = err
		}
		if !timedOut && !wait.Transient(err) || !now.Before(r.bound) {
			r.l.Settle(-1, r.units)
			if timedOut && r.cause != nil {
				// What kept failing says more than the bound's end.
				err = fmt.Errorf("%w (after: %w)", err, r.cause)
			}
			return 0, err, true
		}
		var refused *backend.ServerError
		if !errors.As(err, &refused) {
			// An error reply is a refusal: the server ran nothing of the
			// script (backend rule 2). Anything else, a timeout or a
			// broken connection, may have left it applied.
			r.ambiguous = true
		}
		if !now.Before(until) {
			return 0, err, false
		}
		r.failures++
		pause := min(wait.Backoff(r.failures), until.Sub(now))
		time.Sleep(pause)
	}
}

// settle applies the reply of a release to its lease, and to the
// session's next look (see ReleaseSpec.LookArgs).
func (r *release) settle(rep wait.Reply) (int64, error, bool) {
	if rep.N < 0 && r.ambiguous {
		// An earlier attempt released the last hold.
		rep.N = 0
	}
	switch {
	case r.rs.LookArgs == nil:
	case rep.Woke:
		if sess := r.h.existing(); sess != nil {
			sess.SetLook(r.h.Key, time.Now().Add(r.rs.LookAfter).UnixNano())
		}
	case r.look != 0 && rep.N == 0:
		// Only the release of the owner's last hold (here or by an earlier
		// attempt) freed the mutex and looked at the queue: an inner
		// release of a re-entered hold, or one that found the hold gone,
		// leaves the look to the next.
		if sess := r.h.existing(); sess != nil {
			sess.LookDone(r.h.Key, r.look)
		}
	}
	units := r.units
	if rep.Refused {
		units = 0
	}
	r.l.Settle(rep.N, units)
	if rep.N < 0 {
		return rep.N, fmt.Errorf("%w: %w: %w", dsync.ErrNotHeld, ErrLost, errGone), true
	}
	if rep.Refused {
		return rep.N, ErrRefused, true
	}
	return rep.N, nil, true
}

// noLease is a restored lease of 0 ms, as a script argument.
var noLease any = int64(0)

// RestoredLease returns what a partial release of the hold kept by l
// restores its expiry to, in ms: the watchdog's lease, or 0 for a fixed
// lease, which a release never extends (its holder counts on it ending
// when it said), whatever the releasing handle's own options. It is 0 too
// once l ended here (lost at its deadline, released in the margin before
// the server's expiry; see lease.Lease.Releasable): nobody renews the hold
// any more and its holder was told it is lost, so the release leaves what
// is left of it to expire when the server was to expire it, instead of
// keeping it from everyone for one more lease. ended is whether l had
// ended when the release began.
func RestoredLease(l *lease.Lease, ended bool) int64 {
	if l.Renewed() && !ended {
		return Ms(l.TTL())
	}
	return 0
}

// restoredLeaseArg returns RestoredLease(l, ended) as a script argument,
// boxed once per handle for the common case of the configured lease.
func (h *Handle) restoredLeaseArg(l *lease.Lease, ended bool) any {
	ms := RestoredLease(l, ended)
	if ms == Ms(h.Cfg.Lease) {
		return h.leaseArg
	}
	return ms
}

// Unlock releases one hold of role that ctx refers to (see Take) with
// the release rs. It reports whether there was no hold at all to release,
// in which case it did no I/O.
func (h *Handle) Unlock(ctx context.Context, role string, rs *ReleaseSpec) (err error, none bool) {
	if err := h.Check(); err != nil {
		return err, false
	}
	owner, l := h.Take(ctx, role)
	if l == nil {
		return h.NotHeld("unlock", owner, role), true
	}
	// A hold whose lease ran out less than the expiry margin ago may still
	// be on the server: releasing it spares the others the wait.
	_, err, begun := h.releaseHold(ctx, l, 1, rs, true)
	if !begun {
		return h.Wrap("unlock", fmt.Errorf("%w: %w", dsync.ErrNotHeld, ErrLost)), false
	}
	return h.Wrap("unlock", err), false
}

// MustUnlock is the sync.Locker form of Unlock, for the oldest ownerless
// hold: it panics on an invalid handle or when there is no hold to release,
// as sync.Mutex does, and logs any other failure, a lost hold included.
func (h *Handle) MustUnlock(role string, rs *ReleaseSpec) {
	err, none := h.Unlock(context.Background(), role, rs)
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

// ReleaseHold releases units (1, or a semaphore's permits) of the hold l
// with the release rs (see ReleaseSpec), and returns what the owner holds on
// the server after it. With rs.Local, the waiters of the session queued
// behind the hold are registered by its first attempt.
func (h *Handle) ReleaseHold(ctx context.Context, l *lease.Lease, units int64, rs *ReleaseSpec) (left int64, err error) {
	left, err, _ = h.releaseHold(ctx, l, units, rs, false)
	return left, err
}

// releaseHold is ReleaseHold; with releasable, only of a lease still
// releasable (see lease.Lease.Releasable): it reports whether it began,
// and did nothing if not.
func (h *Handle) releaseHold(ctx context.Context, l *lease.Lease, units int64, rs *ReleaseSpec, releasable bool) (left int64, err error, begun bool) {
	b, ok := l.BeginRelease(lease.Begin{Releasable: releasable, TakeQueued: rs.Local})
	if !ok {
		return 0, nil, false
	}
	if b.Took {
		defer func() {
			if left > 0 {
				l.Reopen()
			}
		}()
	}
	r := &release{h: h, rs: rs, l: l, units: units}
	owner, id, plain := l.Args()
	if rs.Units {
		plain = codec.PlainValue(l.Owner(), l.ID(), l.Role(), append([]int64{units}, rs.PlainFields...)...)
	}
	hd := codec.Header{Owner: owner, Op: ReleaseOp(), HoldID: id, Plain: plain, Lease: h.restoredLeaseArg(l, b.Ended),
		Channel: h.channelArg(rs.Channel), Hub: h.HubID(), EntryTTL: h.durationArg(rs.EntryTTL), FenceTTL: h.fenceArg(rs.Fence)}
	r.args = hd.Append(r.buf[:0])
	if rs.Units {
		r.args = append(r.args, units)
	}
	if rs.ShortArgs != nil && time.Since(l.Began()) < rs.Short {
		if at := h.look(rs); at != 0 && time.Now().UnixNano() >= at {
			r.args, r.look = append(r.args, rs.LookArgs...), at
		} else {
			r.args = append(r.args, rs.ShortArgs...)
		}
	} else {
		r.args = append(r.args, rs.Args...)
	}
	r.fixed = len(r.args)
	for _, e := range b.Queued {
		r.args = append(r.args, e)
	}
	left, err = r.start(ctx, b.Deadline)
	return left, err, true
}

// look returns when a short release with rs through h is to look at the
// queue (see ReleaseSpec.LookArgs), or 0 for never.
func (h *Handle) look(rs *ReleaseSpec) int64 {
	if rs.LookArgs == nil {
		return 0
	}
	return h.Session().Look(h.Key)
}
