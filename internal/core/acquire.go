package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/observe"
)

// Attempt is one try of an acquisition: it runs the primitive's acquire
// script for owner with operation id op. Unless entry is empty, a failure
// registers the waiter under it; registered says an earlier attempt may
// have done so, and a success must remove the registration. On success it
// fills in g.
type Attempt func(ctx context.Context, owner, op, entry string, registered bool, g *Grant) (wait.Result, error)

// Abandon undoes what the attempts of a failed acquisition may have left
// on the server: the registration under entry (if not empty), and an
// acquisition whose reply was lost or a hand-off to the waiter, which it
// passes on.
type Abandon func(ctx context.Context, owner, op, entry string) error

// LockSpec describes the acquisitions of a primitive. A primitive makes
// it once per handle.
type LockSpec struct {
	Role      string
	Channel   string        // the primitive's wake-up channel base
	Heartbeat time.Duration // longest wait between attempts
	Handed    time.Duration // the lease of a hold handed to a waiter
	Try       Attempt
	Abandon   Abandon
	Hold      *HoldSpec

	// Local lets waiters queue behind holds of the session instead of
	// asking the server (see package mutex): the hold's next release
	// registers them. It reorders waiters relative to the server, so a
	// primitive that promises an order must leave it false.
	Local bool

	// Op names the acquisition in errors: "lock" if empty; a try is
	// "try" and Op.
	Op string

	// Entry, if set, makes the entry under which the waiter at address
	// registers for owner; the default is Entry(address, owner, Handed).
	Entry func(address, owner string) string

	// Confirm makes every hand-off to a waiter with an owner from ctx
	// confirmed by an attempt, whose reply names the hold, rather than
	// taken from the wake-up: for a primitive that hands several waiters
	// their holds in one script, two goroutines of one owner may be handed
	// the same hold at once, which only the server's reply tells.
	Confirm bool

	// Units is what an acquisition counts for on the server: 1 if 0, or
	// a semaphore's permits.
	Units int64

	// Kept, if set, is told of every acquisition, with the lease that
	// keeps its hold, and the handle does not remember ownerless holds:
	// a primitive whose holds count units (permits) remembers its own.
	Kept func(owner string, anon bool, l *lease.Lease)
}

func (s *LockSpec) op(try bool) string {
	op := s.Op
	if op == "" {
		op = "lock"
	}
	if try {
		op = "try" + op
	}
	return op
}

// keep records a successful acquisition (see Handle.Keep and Kept).
func (h *Handle) keep(s *LockSpec, owner string, anon bool, g Grant) *lease.Lease {
	l := h.Keep(owner, anon, g, s.Hold, max(s.Units, 1), s.Kept == nil)
	if s.Kept != nil {
		s.Kept(owner, anon, l)
	}
	return l
}

// Entry returns the waiter entry of a waiter at address for owner, which
// asks for a hold of the given lease when handed one: the form hand_off
// reads (see exclusive.lua).
func Entry(address, owner string, lease time.Duration) string {
	return address + "|" + strconv.FormatInt(Ms(lease), 10) + "|" + owner
}

// acquisition is one Lock: what the acquisition loop (package wait) asks
// of the lock core.
type acquisition struct {
	h         *Handle
	s         *LockSpec
	owner, op string
	anon      bool
	got       Grant
	address   string       // the waiter's, once it joined the channel
	entry     string       // under which the waiter registers
	behind    *lease.Lease // the hold of the session it is queued behind (Local)
}

func (a *acquisition) Hub() *hub.Hub { return a.h.Session().Hub }

func (a *acquisition) Try(ctx context.Context, t wait.Try) (wait.Result, error) {
	if t.Address != "" && a.entry == "" {
		a.address = t.Address
		if a.s.Entry != nil {
			a.entry = a.s.Entry(a.address, a.owner)
		} else {
			a.entry = Entry(a.address, a.owner, a.s.Handed)
		}
	}
	if a.s.Local {
		// Woken while queued behind a hold here, or a heartbeat later:
		// ask the server from now on.
		a.unqueue(ctx)
		if t.Prior == 0 && a.entry != "" {
			if l := a.h.Session().Sched.Other(a.h.Key, a.owner, a.s.Role); l != nil {
				if token, ok := l.Enqueue(a.entry); ok {
					// Should the hold expire without a release, as
					// a fixed lease does, the waiter asks the server
					// then, as a registered one would. The hold's
					// token is the one the waiter saw: only a
					// release that began after this registers it,
					// and hands it a newer one.
					a.behind = l
					return wait.Result{RetryIn: max(0, time.Until(l.Deadline())), Token: token}, nil
				}
			}
		}
	}
	r, err := a.s.Try(ctx, a.owner, a.op, a.entry, t.Prior > 0, &a.got)
	if err == nil && r.Acquired && a.h.late(a.got) {
		// Ask again at once: the retry, with the same operation id,
		// confirms the hold and says how long it has left.
		return wait.Result{RetryIn: 0}, nil
	}
	return r, err
}

// unqueue takes the waiter out of the queue behind a hold of the session,
// if it is in one. If a release already took its entry, it waits until
// that release's attempt has ended: only then may the waiter's own
// attempt or abandon follow, or the registration would come after them.
func (a *acquisition) unqueue(ctx context.Context) {
	if a.behind == nil {
		return
	}
	if sent := a.behind.Dequeue(a.entry); sent != nil {
		select {
		case <-sent:
		case <-ctx.Done():
			return // still behind: the abandon waits again
		}
	}
	a.behind = nil
}

func (a *acquisition) Granted(token int64, since time.Time) bool {
	// The loop calls this only for a grant handed after the latest
	// failed attempt, sent at since (see wait.Acquirer.Granted): the
	// hold began after since, and the hand-off took the waiter's entry.
	// Without time to spare, the next attempt confirms the hold and
	// restarts its lease; so does a waiter on a fixed lease handed a
	// shorter one, to extend it to its own, and one whose owner holds
	// already (in another goroutine): a hand-off may have joined that
	// hold, whose id only the server's reply tells.
	s, h := a.s, a.h
	if time.Since(since) >= s.Handed/2 || (!h.Cfg.Watchdog && s.Handed < h.Cfg.Lease) ||
		(s.Confirm && !a.anon) || h.Session().Sched.Holds(h.Key, a.owner, s.Role) {
		return false
	}
	a.got = Grant{Count: 1, Token: token, ID: a.op, Sent: since, TTL: s.Handed}
	return true
}

func (a *acquisition) Abandon(ctx context.Context) error {
	if a.s.Local {
		a.unqueue(ctx)
		// A hold handed to this waiter is passed on by the abandon: the
		// session's waiters queued behind it ask the server.
		defer a.h.Session().Sched.DropPending(a.h.Key, a.op)
	}
	return a.s.Abandon(ctx, a.owner, a.op, a.entry)
}

// Lock acquires a hold of role for ctx's owner (or a fresh ownerless
// one), waiting while it is held elsewhere, until ctx is done.
func (h *Handle) Lock(ctx context.Context, s *LockSpec) (err error) {
	if err := h.Begin(s.op(false), ctx); err != nil {
		return err
	}
	var waiting func(int)
	if o := h.Observer(); o != nil {
		var done func(observe.AcquireResult)
		start := time.Now()
		ctx, done = o.StartAcquire(ctx, observe.Acquisition{Primitive: h.Kind, Name: h.Name, Role: s.Hold.Role})
		defer func() {
			done(observe.AcquireResult{Outcome: observe.OutcomeOf(ctx, true, err), Wait: time.Since(start), Err: err})
		}()
		if o.Waiting != nil {
			waiting = func(delta int) { o.ReportWaiting(observe.Waiters{Primitive: h.Kind, Name: h.Name, Delta: delta}) }
		}
	}
	a := &acquisition{h: h, s: s}
	a.owner, a.anon = LockOwner(ctx)
	a.op = a.owner // an ownerless hold's owner is as fresh as an operation id
	if !a.anon {
		a.op = dsync.NewID()
	}
	err = wait.Acquire(ctx, wait.Spec{
		Channel:   s.Channel,
		WaiterID:  a.op, // a hand-off counts as the acquisition op
		Heartbeat: s.Heartbeat,
		Logger:    h.Cfg.Logger,
		Name:      h.Name,
		Waiting:   waiting,
	}, a)
	if err != nil {
		return h.Wrap(s.op(false), err)
	}
	h.keep(s, a.owner, a.anon, a.got)
	return nil
}

// MustLock is the sync.Locker form of Lock, for a fresh ownerless hold:
// it waits however long it takes and panics on an error that cannot pass,
// such as an invalid handle or a closed backend.
func (h *Handle) MustLock(s *LockSpec) {
	if err := h.Lock(context.Background(), s); err != nil {
		panic("dsync/" + h.Kind + ": Lock: " + err.Error())
	}
}

// TryLock makes one attempt at a hold of role for ctx's owner, without
// waiting for another holder, and reports whether it holds it now. When
// the attempt fails with an error, nothing is left held.
func (h *Handle) TryLock(ctx context.Context, s *LockSpec) (acquired bool, err error) {
	if err := h.Begin(s.op(true), ctx); err != nil {
		return false, err
	}
	if o := h.Observer(); o != nil {
		var done func(observe.AcquireResult)
		start := time.Now()
		ctx, done = o.StartAcquire(ctx, observe.Acquisition{Primitive: h.Kind, Name: h.Name, Role: s.Hold.Role, Try: true})
		defer func() {
			done(observe.AcquireResult{Outcome: observe.OutcomeOf(ctx, acquired, err), Wait: time.Since(start), Err: err})
		}()
	}
	owner, anon := LockOwner(ctx)
	op := owner
	if !anon {
		op = dsync.NewID()
	}
	var got Grant
	r, err := s.Try(ctx, owner, op, "", false, &got)
	for retries := 0; err == nil && r.Acquired && h.late(got); retries++ {
		// As in Lock: a retry with the same operation id confirms the
		// hold and says how long it has left.
		if retries == maxLateRetries {
			err = errLate
			break
		}
		r, err = s.Try(ctx, owner, op, "", false, &got)
	}
	if err != nil {
		// The attempt may have succeeded with its reply lost.
		wait.Cleanup(ctx, func(ctx context.Context) { s.Abandon(ctx, owner, op, "") })
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = ctxError(cerr, err)
		}
		return false, h.Wrap(s.op(true), err)
	}
	if !r.Acquired {
		return false, nil
	}
	h.keep(s, owner, anon, got)
	return true, nil
}

// HandoffLease bounds the first lease of a hold that a release hands to a
// waiter while the watchdog is on: a waiter that died since its last
// attempt holds the primitive up for at most this. A live waiter's
// watchdog extends it at its first renewal; a waiter on a longer fixed
// lease extends it with one more attempt when woken.
const HandoffLease = 2 * time.Second

// HandedLease returns the lease of a hold handed to a waiter of a FIFO
// queue by a release: at most HandoffLease and the waiter timeout, so that
// a waiter that died since its last heartbeat holds the primitive up only
// briefly.
func (h *Handle) HandedLease() time.Duration {
	return min(h.Cfg.Lease, HandoffLease, h.Cfg.WaiterTimeout)
}

// maxLateRetries bounds the retries of a try whose replies keep coming
// too late (see late).
const maxLateRetries = 3

// errLate is the error of a try whose replies kept coming too late.
var errLate = errors.New("the server's replies came after the hold's lease had run out")

// late reports whether the reply that granted g came so late that, counted
// from when its call was sent, the hold's lease has run out already (less
// the expiry margin): the server, stalled or paused with the call queued,
// ran it later, and the hold is likely still there, but the client cannot
// tell for how long.
func (h *Handle) late(g Grant) bool {
	if g.TTL <= 0 {
		return false
	}
	m := h.Cfg.ExpiryMargin
	if m < 0 {
		m = lease.DefaultMargin(g.TTL)
	}
	return time.Since(g.Sent) >= g.TTL-min(m, g.TTL/2)
}

// AcquireReply decodes the reply of an acquire script for operation op,
// asking for a lease of ttl, sent at sent:
//
//	token                                  a new hold, taken by op for ttl
//	{1, hold count, token, hold id,        acquired (or re-entered)
//	    remaining ms of the hold}
//	{0, remaining ms of the holder's claim not acquired
//	    (-1 unknown), the current token}
func AcquireReply(reply any, op string, ttl time.Duration, sent time.Time, g *Grant) (wait.Result, error) {
	if token, ok := reply.(int64); ok {
		if token < 1 {
			return wait.Result{}, fmt.Errorf("%w: acquire reply %v", dsync.ErrUnexpectedReply, reply)
		}
		*g = Grant{Count: 1, Token: token, ID: op, Sent: sent, TTL: ttl}
		return wait.Result{Acquired: true}, nil
	}
	r, err := backend.Array(reply, 3)
	if err != nil {
		return wait.Result{}, err
	}
	ok, err1 := backend.Int(r[0])
	n, err2 := backend.Int(r[1])
	token, err3 := backend.Int(r[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return wait.Result{}, err
	}
	if ok == 0 {
		retry := time.Duration(-1)
		if n >= 0 {
			retry = time.Duration(n) * time.Millisecond
		}
		return wait.Result{RetryIn: retry, Token: token}, nil
	}
	if len(r) < 5 || n < 1 || token < 1 {
		return wait.Result{}, fmt.Errorf("%w: acquire reply %v", dsync.ErrUnexpectedReply, reply)
	}
	id, err1 := backend.String(r[3])
	left, err2 := backend.Int(r[4])
	if err := errors.Join(err1, err2); err != nil {
		return wait.Result{}, err
	}
	*g = Grant{Count: n, Token: token, ID: id, Sent: sent, TTL: time.Duration(left) * time.Millisecond}
	return wait.Result{Acquired: true}, nil
}

// AttemptArgs returns owner and op as script arguments for one attempt,
// to be kept with the hold it starts (Grant.KeepArgs) for its renewals and
// release; an ownerless hold's owner is its operation, one value for both.
func AttemptArgs(owner, op string) (ownerArg, opArg any) {
	ownerArg = owner
	opArg = ownerArg
	if op != owner {
		opArg = op
	}
	return ownerArg, opArg
}

// KeepArgs keeps in g, the grant of an attempt made with ownerArg and
// opArg (see AttemptArgs) that the script answered with reply, the
// arguments its hold's renewals and release pass again.
func (g *Grant) KeepArgs(ownerArg, opArg, reply any) {
	g.OwnerArg = ownerArg
	if op, _ := opArg.(string); op == g.ID {
		g.IDArg = opArg
	}
	if _, fresh := reply.(int64); fresh {
		g.TokenArg = reply
	}
}

// Attempt runs the acquire script s through h's backend for an attempt on
// ctx's behalf, bounded as wait.AttemptContext says.
func (h *Handle) Attempt(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	actx, release := wait.AttemptContext(ctx)
	reply, err := h.B.Eval(actx, s, keys, args...)
	release()
	return reply, err
}
