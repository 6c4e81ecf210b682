package core

import (
	"context"
	"errors"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/observe"
)

// LockSpec describes the acquisitions of a primitive, as data that the
// core runs: the scripts, the keys and the arguments they take after the
// argument header (see package codec), which the core fills in. A
// primitive makes it once per handle.
type LockSpec struct {
	Role      string
	Channel   string        // the primitive's wake-up channel base
	Heartbeat time.Duration // longest wait between attempts
	Handed    time.Duration // the lease of a hold handed to a waiter
	EntryTTL  time.Duration // how long a waiter's entry lives without an attempt

	// Keys are those of every script, the main key first. Acquire makes
	// an attempt, and a failed one registers the waiter unless its entry
	// is empty; Abandon undoes what the attempts of a failed acquisition
	// may have left on the server: the registration, and an acquisition
	// whose reply was lost or a hand-off to the waiter, which it passes
	// on. Both take the header, then Args.
	Keys             []string
	Acquire, Abandon *backend.Script
	Args             []any

	// Fence says that Keys end with the primitive's fence key, which
	// keeps the last token drawn for the fence ttl (see fence.lua).
	Fence bool

	// Plain lets the first attempt of an acquisition take the primitive
	// with one SET NX of the hold's plain value, as the acquire script's
	// fast path does, through a backend that implements backend.Setter:
	// for a primitive whose main key, when missing, says that anyone may
	// take it: the mutex, whose waiters take no turn (see codec.lua), or
	// one whose scripts keep that key while anything else is on it (the
	// semaphore's waiters and runtime capacity, see its lua/state.lua).
	// Until a plain reply (codec.Attempt.Plain) says the primitive was
	// found free again, a handle whose attempt found it held or shared
	// asks the script first.
	Plain bool

	// Announce, if set, is a channel on which a plain acquisition
	// publishes Hint in the round trip of its SET NX, through a backend
	// that implements backend.SetPublisher (elsewhere it asks the
	// script): an election's observers, told to read the term (see
	// election/lua/term.lua).
	Announce, Hint string

	// Refine, if set, turns an error of the acquire script into the
	// primitive's own (dsync.ErrUpgrade, ...).
	Refine func(error) error

	// Fields, if set, are what a waiter's entry asks for (see
	// codec.EntryOf); the default is the lease of a hold handed to it.
	// PlainFields follow the owner and the hold id in the hold's plain
	// value (see codec.PlainValue), and PlainTail, if set, ends it (see
	// codec.NewHold).
	Fields, PlainFields []int64
	PlainTail           string

	Hold *HoldSpec

	// Local lets waiters queue behind holds of the session instead of
	// asking the server (see package mutex): the hold's next release
	// registers them. It reorders waiters relative to the server, so a
	// primitive that promises an order must leave it false.
	Local bool

	// Op names the acquisition in errors: "lock" if empty; a try is
	// "try" and Op.
	Op string

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

	// Fresh makes every acquisition a fresh owner's, whatever owner ctx
	// carries, as if ctx had been given one of its own (dsync.WithOwner):
	// an election's candidate. The owner is made with the hold id, at no
	// cost of its own.
	Fresh bool
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

// acquisition is one Lock or TryLock: what the acquisition loop (package
// wait) asks of the lock core.
type acquisition struct {
	h         *Handle
	s         *LockSpec
	owner, op string
	anon      bool
	got       Grant
	sent      bool         // an attempt was sent: the next one asks the script
	try       bool         // a TryLock: its one attempt must know what it holds
	address   string       // the waiter's, once it joined the channel
	entry     string       // under which the waiter registers
	behind    *lease.Lease // the hold of the session it is queued behind (Local)

	ownerArg, opArg, plainArg any                      // made once, for every attempt and the hold's release
	entryBox                  any                      // entry, once made
	buf                       [codec.HeaderLen + 4]any // an attempt's args, until one fails
	lent                      bool                     // an attempt failed: buf may still be read
}

// entryArg returns the waiter entry as a script argument, made once.
func (a *acquisition) entryArg() any {
	if a.entry == "" {
		return ""
	}
	if a.entryBox == nil {
		a.entryBox = a.entry
	}
	return a.entryBox
}

func (h *Handle) newAcquisition(ctx context.Context, s *LockSpec) *acquisition {
	a := &acquisition{h: h, s: s}
	// ctx's owner, or a fresh one for an ownerless hold. An operation id
	// of its own even for an ownerless hold, whose owner is as fresh: only
	// a portable permit (LockUnkept) has its owner for its hold id, so that
	// a permit's id never names another hold.
	owner, ok := dsync.OwnerFrom(ctx)
	if s.Fresh {
		owner, ok = "", true
	}
	var plain string
	a.owner, a.op, plain = codec.NewHold(owner, s.Role, s.PlainTail, s.PlainFields...)
	a.anon = !ok
	a.ownerArg, a.opArg, a.plainArg = a.owner, a.op, plain
	return a
}

func (a *acquisition) Hub() *hub.Hub { return a.h.Session().Hub }

func (a *acquisition) Try(ctx context.Context, t wait.Try) (wait.Result, error) {
	if t.Address != "" && a.entry == "" {
		a.address = t.Address
		fields := a.s.Fields
		if fields == nil {
			fields = []int64{Ms(a.s.Handed)}
		}
		a.entry = codec.EntryOf(a.address, a.owner, fields...)
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
					// and hands it a newer one. A plain hold's token,
					// not drawn yet, is taken as 1 for the same
					// reason: the entry reaches the server with that
					// release, and any grant for it is newer.
					a.behind = l
					// The release registers the entry on the server:
					// the next attempt must be the script's, which
					// takes it out of the queue. A plain SET NX, on a
					// mutex a release left free, would take it and
					// leave the entry queued, for a later release to
					// hand the mutex to an acquisition that is over.
					a.sent = true
					return wait.Result{RetryIn: max(0, time.Until(l.Deadline())), Token: max(token, 1)}, nil
				}
			}
		}
	}
	r, err := a.attempt(ctx, t.Prior > 0)
	if err == nil && r.Acquired && a.h.late(a.got) {
		// Ask again at once: the retry, with the same operation id,
		// confirms the hold and says how long it has left.
		return wait.Result{RetryIn: 0}, nil
	}
	return r, err
}

// attempt makes one attempt: with one SET NX where the spec allows it and
// nothing was sent before (an earlier attempt may have taken the hold,
// which only the script recognises), else with the acquire script.
// registered says an earlier attempt may have registered the waiter.
func (a *acquisition) attempt(ctx context.Context, registered bool) (wait.Result, error) {
	s, h := a.s, a.h
	first := !a.sent
	a.sent = true
	if first && s.Plain && !h.contended.Load() {
		if st, ok := h.setter(s); ok && !h.reentry(a.owner, a.anon, s.Role) {
			sent := time.Now()
			actx, release := wait.AttemptContext(ctx)
			var ok bool
			var err error
			if s.Announce != "" {
				ok, err = st.(backend.SetPublisher).SetNXPublish(actx, s.Keys[0], a.plainArg.(string), h.Cfg.Lease, s.Announce, s.Hint)
			} else {
				ok, err = st.SetNX(actx, s.Keys[0], a.plainArg.(string), h.Cfg.Lease)
			}
			release()
			switch {
			case err != nil:
				return wait.Result{}, wait.Unanswered(ctx, err)
			case ok:
				a.got = Grant{Count: 1, ID: a.op, Sent: sent, TTL: h.Cfg.Lease, OwnerArg: a.ownerArg, IDArg: a.opArg, PlainArg: a.plainArg}
				return wait.Result{Acquired: true}, nil
			case a.anon && !a.try && a.entry == "":
				// Held by another: a fresh owner cannot hold it, unless
				// this very SET took it and its reply was lost to a
				// client that retried it (see backend.Setter), which
				// the next attempt, the script's, finds. That one
				// comes at once: the waiter joins the channel first.
				h.contended.Store(true)
				return wait.Result{RetryIn: -1}, nil
			}
			// Held, perhaps by this owner (through another backend
			// value of the process, or by this SET, retried by the
			// client after a lost reply): the script tells, and
			// registers a waiter that has joined the channel already,
			// whom nothing else would wake.
			h.contended.Store(true)
		}
	}
	var args []any
	if !a.lent {
		args = a.buf[:0]
	}
	args = a.header(args, registered)
	args = append(args, s.Args...)
	sent := time.Now()
	reply, err := h.Attempt(ctx, s.Acquire, s.Keys, args...)
	if err != nil {
		// The backend may read a failed call's args after it returned
		// (see backend.Backend): the next attempt has its own.
		a.lent = true
		if s.Refine != nil {
			err = s.Refine(err)
		}
		return wait.Result{}, err
	}
	r, err := codec.AttemptReply(reply, a.op, h.Cfg.Lease)
	if err != nil {
		return wait.Result{}, err
	}
	if !r.Acquired {
		h.contended.Store(true)
		return wait.Result{RetryIn: r.RetryIn, Token: r.Seen}, nil
	}
	if r.Plain {
		// Only a plain reply says the primitive was free with nothing
		// around it, as a SET NX would have found it. Any other grant
		// may join holders that stay (a semaphore's permits, a read
		// hold) or follow waiters: a SET NX there would only fail and
		// cost the next acquisition a round trip more.
		h.contended.Store(false)
	}
	a.got = Grant{Count: r.Count, Token: r.Token, ID: r.ID, Sent: sent, TTL: r.TTL, OwnerArg: a.ownerArg}
	if r.ID == a.op {
		a.got.IDArg, a.got.PlainArg = a.opArg, a.plainArg
	}
	return wait.Result{Acquired: true}, nil
}

// setter returns h's backend as the Setter that a plain acquisition of s
// needs: a SetPublisher if s announces it.
func (h *Handle) setter(s *LockSpec) (backend.Setter, bool) {
	if s.Announce != "" {
		sp, ok := h.B.(backend.SetPublisher)
		return sp, ok
	}
	st, ok := h.B.(backend.Setter)
	return st, ok
}

// header appends the argument header of an attempt to buf.
func (a *acquisition) header(buf []any, registered bool) []any {
	h := a.h
	hd := codec.Header{Owner: a.ownerArg, Op: a.opArg, Plain: a.plainArg, Lease: h.leaseArg, Channel: h.channelArg(a.s.Channel),
		Hub: h.HubID(), Entry: a.entryArg(), EntryTTL: h.durationArg(a.s.EntryTTL), Registered: registered, FenceTTL: h.fenceArg(a.s.Fence)}
	return hd.Append(buf)
}

// reentry reports whether owner holds in role through h's session: its
// acquisition re-enters that hold, which only the script does.
func (h *Handle) reentry(owner string, anon bool, role string) bool {
	if anon {
		return false
	}
	s := h.existing()
	return s != nil && s.Sched.Holds(h.Key, owner, role)
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
	a.got = Grant{Count: 1, Token: token, ID: a.op, Sent: since, TTL: s.Handed, OwnerArg: a.ownerArg, IDArg: a.opArg, PlainArg: a.plainArg}
	return true
}

func (a *acquisition) Abandon(ctx context.Context) error {
	if a.s.Local {
		a.unqueue(ctx)
		// A hold handed to this waiter is passed on by the abandon: the
		// session's waiters queued behind it ask the server.
		defer a.h.Session().Sched.DropPending(a.h.Key, a.op)
	}
	var buf [codec.HeaderLen + 4]any
	args := a.header(buf[:0], a.entry != "")
	args = append(args, a.s.Args...)
	_, err := a.h.HandOff(ctx, a.s.Channel, a.s.Abandon, a.s.Keys, args...)
	return err
}

// Lock acquires a hold of role for ctx's owner (or a fresh ownerless
// one), waiting while it is held elsewhere, until ctx is done.
func (h *Handle) Lock(ctx context.Context, s *LockSpec) error {
	_, err := h.LockHold(ctx, s)
	return err
}

// LockHold is Lock, returning the lease that keeps the hold.
func (h *Handle) LockHold(ctx context.Context, s *LockSpec) (_ *lease.Lease, err error) {
	if err := h.Begin(s.op(false), ctx); err != nil {
		return nil, err
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
	a := h.newAcquisition(ctx, s)
	err = wait.Acquire(ctx, wait.Spec{
		Channel:   s.Channel,
		WaiterID:  a.op, // a hand-off counts as the acquisition op
		Heartbeat: s.Heartbeat,
		Logger:    h.Cfg.Logger,
		Name:      h.Name,
		Waiting:   waiting,
	}, a)
	if err != nil {
		return nil, h.Wrap(s.op(false), err)
	}
	return h.keep(s, a.owner, a.anon, a.got), nil
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
func (h *Handle) TryLock(ctx context.Context, s *LockSpec) (bool, error) {
	l, err := h.TryLockHold(ctx, s)
	return l != nil, err
}

// TryLockHold is TryLock, returning the lease that keeps the hold, or nil
// if it was not acquired.
func (h *Handle) TryLockHold(ctx context.Context, s *LockSpec) (l *lease.Lease, err error) {
	if err := h.Begin(s.op(true), ctx); err != nil {
		return nil, err
	}
	if o := h.Observer(); o != nil {
		var done func(observe.AcquireResult)
		start := time.Now()
		ctx, done = o.StartAcquire(ctx, observe.Acquisition{Primitive: h.Kind, Name: h.Name, Role: s.Hold.Role, Try: true})
		defer func() {
			done(observe.AcquireResult{Outcome: observe.OutcomeOf(ctx, l != nil, err), Wait: time.Since(start), Err: err})
		}()
	}
	a := h.newAcquisition(ctx, s)
	a.try = true
	r, err := a.attempt(ctx, false)
	if wait.IsUnanswered(err) {
		// Cut off by its own bound with ctx alive, on a server slower
		// than that: one attempt more, the script's with the same
		// operation id, which finds the hold if the first took it, and
		// waits for the reply as long as ctx is alive.
		ctx = wait.Watch(ctx)
		r, err = a.attempt(ctx, false)
	}
	for retries := 0; err == nil && r.Acquired && h.late(a.got); retries++ {
		// As in Lock: a retry with the same operation id confirms the
		// hold and says how long it has left.
		if retries == maxLateRetries {
			err = errLate
			break
		}
		r, err = a.attempt(ctx, false)
	}
	if err != nil {
		// The attempt may have succeeded with its reply lost.
		wait.Cleanup(ctx, func(ctx context.Context) { a.Abandon(ctx) })
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = ctxError(cerr, err)
		}
		return nil, h.Wrap(s.op(true), err)
	}
	if !r.Acquired {
		return nil, nil
	}
	return h.keep(s, a.owner, a.anon, a.got), nil
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

// Attempt runs the acquire script s through h's backend for an attempt on
// ctx's behalf, bounded as wait.AttemptContext says.
func (h *Handle) Attempt(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	actx, release := wait.AttemptContext(ctx)
	reply, err := h.B.Eval(actx, s, keys, args...)
	release()
	return reply, wait.Unanswered(ctx, err)
}
