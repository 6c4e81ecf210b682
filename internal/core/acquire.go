package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
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

// LockSpec describes the acquisitions of a primitive.
type LockSpec struct {
	Role      string
	Channel   string        // the primitive's wake-up channel base
	Heartbeat time.Duration // longest wait between attempts
	Handed    time.Duration // the lease of a hold handed to a waiter
	Try       Attempt
	Abandon   Abandon
	Hold      HoldSpec

	// Local, if set, lets waiters queue behind holds of this process
	// instead of asking the server (see package mutex). It reorders
	// waiters relative to the server, so a primitive that promises an
	// order must leave it nil.
	Local Local

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

	// Kept, if set, is told of every acquisition, with the lease that
	// keeps its hold, and the handle does not remember ownerless holds:
	// a primitive whose holds count units (permits) remembers its own.
	Kept func(owner string, anon bool, l *lease.Lease)
}

func (s LockSpec) op(try bool) string {
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
func (h *Handle) keep(s LockSpec, owner string, anon bool, g Grant) *lease.Lease {
	l := h.Keep(owner, anon && s.Kept == nil, g, s.Hold)
	if s.Kept != nil {
		s.Kept(owner, anon, l)
	}
	return l
}

// Local is queueing behind holds of this process.
type Local interface {
	// Before runs before each attempt of the waiter with the given entry
	// (empty until it joined the channel); if it reports queued, the
	// attempt is not sent and the waiter waits up to lasts (-1: a
	// heartbeat) for a wake-up.
	Before(ctx context.Context, owner, entry string, a wait.Try) (queued bool, lasts time.Duration)
	// Leave runs before the abandon of a failed acquisition by the waiter
	// at address ("" if it never joined).
	Leave(ctx context.Context, address string)
	// Held records the hold that the waiter at address ("" if it did not
	// wait) acquired.
	Held(owner, address string, l *lease.Lease)
}

// Entry returns the waiter entry of a waiter at address for owner, which
// asks for a hold of the given lease when handed one: the form hand_off
// reads (see exclusive.lua).
func Entry(address, owner string, lease time.Duration) string {
	return address + "|" + strconv.FormatInt(Ms(lease), 10) + "|" + owner
}

// Lock acquires a hold of role for ctx's owner (or a fresh ownerless
// one), waiting while it is held elsewhere, until ctx is done.
func (h *Handle) Lock(ctx context.Context, s LockSpec) (err error) {
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
	owner, anon := LockOwner(ctx)
	op := dsync.NewID()
	var (
		got     Grant
		address string // the waiter's, once it joined the channel
		entry   string // under which the waiter registers
	)
	err = wait.Acquire(ctx, wait.Spec{
		Backend:   h.B,
		Channel:   s.Channel,
		WaiterID:  op, // a hand-off counts as the acquisition op
		Heartbeat: s.Heartbeat,
		Logger:    h.Cfg.Logger,
		Name:      h.Name,
		Waiting:   waiting,
		Try: func(ctx context.Context, a wait.Try) (wait.Result, error) {
			if a.Address != "" && entry == "" {
				address = a.Address
				if s.Entry != nil {
					entry = s.Entry(address, owner)
				} else {
					entry = Entry(address, owner, s.Handed)
				}
			}
			if s.Local != nil {
				if queued, lasts := s.Local.Before(ctx, owner, entry, a); queued {
					return wait.Result{RetryIn: lasts}, nil
				}
			}
			r, err := s.Try(ctx, owner, op, entry, a.Prior > 0, &got)
			if err == nil && r.Acquired && h.late(got) {
				// Ask again at once: the retry, with the same operation
				// id, confirms the hold and says how long it has left.
				return wait.Result{RetryIn: 0}, nil
			}
			return r, err
		},
		Granted: func(token int64, since time.Time) bool {
			// Without time to spare, the next attempt confirms the
			// hold and restarts its lease; so does a waiter on a fixed
			// lease handed a shorter one, to extend it to its own, and
			// one whose owner holds already (in another goroutine): a
			// hand-off may have joined that hold, whose id only the
			// server's reply tells.
			if time.Since(since) >= s.Handed/2 || (!h.Cfg.Watchdog && s.Handed < h.Cfg.Lease) ||
				(s.Confirm && !anon) || len(lease.Anywhere(h.Key, owner, s.Role)) > 0 {
				return false
			}
			got = Grant{Count: 1, Token: token, ID: op, Sent: since, TTL: s.Handed}
			return true
		},
		Abandon: func(ctx context.Context) error {
			if s.Local != nil {
				s.Local.Leave(ctx, address)
			}
			return s.Abandon(ctx, owner, op, entry)
		},
	})
	if err != nil {
		return h.Wrap(s.op(false), err)
	}
	l := h.keep(s, owner, anon, got)
	if s.Local != nil {
		s.Local.Held(owner, address, l)
	}
	return nil
}

// MustLock is the sync.Locker form of Lock, for a fresh ownerless hold:
// it waits however long it takes and panics on an error that cannot pass,
// such as an invalid handle or a closed backend.
func (h *Handle) MustLock(s LockSpec) {
	if err := h.Lock(context.Background(), s); err != nil {
		panic("dsync/" + h.Kind + ": Lock: " + err.Error())
	}
}

// TryLock makes one attempt at a hold of role for ctx's owner, without
// waiting for another holder, and reports whether it holds it now. When
// the attempt fails with an error, nothing is left held.
func (h *Handle) TryLock(ctx context.Context, s LockSpec) (acquired bool, err error) {
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
	op := dsync.NewID()
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
	l := h.keep(s, owner, anon, got)
	if s.Local != nil {
		s.Local.Held(owner, "", l)
	}
	return true, nil
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

// AcquireReply decodes the reply of an acquire script sent at sent:
//
//	{1, hold count, token, hold id,          acquired (or re-entered)
//	    remaining ms of the hold}
//	{0, remaining ms of the holder's claim   not acquired
//	    (-1 unknown), the current token}
func AcquireReply(reply any, sent time.Time, g *Grant) (wait.Result, error) {
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
	ttl, err2 := backend.Int(r[4])
	if err := errors.Join(err1, err2); err != nil {
		return wait.Result{}, err
	}
	*g = Grant{Count: n, Token: token, ID: id, Sent: sent, TTL: time.Duration(ttl) * time.Millisecond}
	return wait.Result{Acquired: true}, nil
}
