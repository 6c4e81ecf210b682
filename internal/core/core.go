// Package core is the lock core that dsync's primitives share: a handle's
// name, keys and options, owner resolution, holds (owned and ownerless),
// hold start and extension, fencing token and lost-signal lookup, the
// release loop and the acquisition loop. A primitive built on it is its
// Lua scripts and its semantics.
//
// # Holds
//
// A hold belongs to an owner and to the session (package session) of the
// backend value it was taken through: any handle on the same name and
// backend value finds its owner's hold there. Every hold has an id on the
// server (the operation id of the acquisition that started it), which a
// release names, so that it never releases another hold of the same
// owner. An owner that acquires through two backend values of the process
// on the same server re-enters one hold on the server, which each session
// counts for the acquisitions made through it and releases through it
// only: a release through a backend value whose session holds nothing is
// ErrNotHeld, and says so when another session keeps the owner's hold.
//
// An ownerless acquisition (a ctx without dsync.WithOwner) takes a hold
// for a fresh owner, which the handle remembers, oldest first. An
// ownerless release or query refers to those: a release takes the oldest,
// so that a late release by a goroutine whose hold was lost finds its own
// lost hold, not the next holder's; a query looks at the newest.
//
// # Map of internal/
//
// A primitive (mutex, fairlock, rwlock, semaphore, election) is its Lua
// scripts and its semantics; it calls this package, which owns the
// acquisition and the release of a hold:
//
//	primitive → core → wait → hub       waiting: try, then sleep until a
//	                                     wake-up, the holder's expiry or a
//	                                     heartbeat; pub/sub fan-out
//	primitive → core → lease             keeping: renewal, expiry, the lost
//	                                     signal, the hold index, waiters
//	                                     queued behind a hold
//	core → session → {lease, hub}        one session per backend value owns
//	                                     the scheduler and the hub
//
// Where a change belongs: waiting and wake-ups in wait and hub; renewal,
// expiry, the lost signal and local queueing in lease; hand-off and
// release in core (release.go, acquire.go) and the Lua library
// (internal/script: lib.lua, waiters.lua, queue.lua, exclusive.lua);
// fencing in internal/script/fence.lua; a primitive's state encoding in
// its own lua/ directory.
package core

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/options"
	"github.com/dsyncgo/dsync/internal/session"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/observe"
)

// Exclusive is the role of a hold that excludes every other.
const Exclusive = "x"

// ErrLost is wrapped, with dsync.ErrNotHeld, in the errors about a hold
// that was lost.
var ErrLost = errors.New("the hold was lost")

// errElsewhere is wrapped, with dsync.ErrNotHeld, in the error of a
// release through a backend value that did not take the owner's hold.
var errElsewhere = errors.New("the owner's hold was taken through another backend value of this process: release it through that one")

// Handle is what every primitive's handle embeds: the backend, the name,
// the options and the primitive's main key, and the ownerless holds taken
// through it. Its zero value reports an error from every call.
type Handle struct {
	B    backend.Backend
	Kind string // "mutex", "fairlock", ...
	Name string
	Cfg  options.Common
	Key  string // the main key; companions append ":" and a suffix

	err    error                           // invalid arguments, reported by every call
	handed wait.Handed                     // see QueueLocally
	sess   atomic.Pointer[session.Session] // B's session, as last seen
	mu     sync.Mutex                      // guards anon
	anon   map[string][]*lease.Lease       // ownerless holds by role, oldest first

	// contended says that an attempt through h found the primitive
	// held, or shared with other holders, since a script last found it
	// free with nothing around it (a plain reply, see codec.Attempt): the
	// next acquisition asks its script at once rather than try a plain
	// SET NX first (see LockSpec.Plain).
	contended atomic.Bool

	// Script arguments made once: Cfg.Lease, Cfg.FenceTTL and
	// Cfg.WaiterTimeout in ms, in decimal (an adapter that sends strings,
	// as rueidis's does, would format an integer on every call), and the
	// wake channel (Companion("wake")).
	leaseArg, fenceTTLArg, waiterTOArg, wakeArg any
	wake                                        string
}

// Init sets h up for the primitive of kind called name on b. Invalid
// arguments are kept and reported by every call, before any I/O.
func (h *Handle) Init(b backend.Backend, kind, name string, cfg options.Common) {
	h.B, h.Kind, h.Name, h.Cfg = b, kind, name, cfg
	h.err = cfg.Check()
	if err := options.CheckBackend(b); err != nil {
		h.err = err
	}
	base, err := keys.Base(cfg.Prefix, kind, name)
	if h.err == nil && err != nil {
		h.err = err
	}
	h.Key = base
	h.leaseArg, h.fenceTTLArg, h.waiterTOArg = MsArg(cfg.Lease), MsArg(cfg.FenceTTL), MsArg(cfg.WaiterTimeout)
	h.wake = h.Companion("wake")
	h.wakeArg = h.wake
	if h.err != nil {
		h.err = fmt.Errorf("%s %q: %w", kind, truncate(name), h.err)
	}
}

// Session returns the session of h's backend, made if it has none.
func (h *Handle) Session() *session.Session {
	if s := h.sess.Load(); s != nil && !s.Retired() {
		return s
	}
	s := session.For(h.B)
	h.sess.Store(s)
	return s
}

// existing returns the session of h's backend, or nil if it has none:
// nothing is held through it.
func (h *Handle) existing() *session.Session {
	if s := h.sess.Load(); s != nil && !s.Retired() {
		return s
	}
	s := session.Lookup(h.B)
	if s != nil {
		h.sess.Store(s)
	}
	return s
}

// Observer returns the observer of h's acquisitions, holds and waiters:
// its own (WithObserver), or its backend's (observe.Set), or nil.
func (h *Handle) Observer() *observe.Observer {
	if h.Cfg.Observer != nil {
		return h.Cfg.Observer
	}
	return observe.For(h.B)
}

// fenceArg returns the fence ttl of the argument header (see
// codec.FenceTTL): h's, for a script whose keys end with the fence key.
func (h *Handle) fenceArg(fence bool) any {
	if !fence {
		return nil // the header's "0"
	}
	if h.fenceTTLArg == nil {
		return Ms(h.Cfg.FenceTTL)
	}
	return h.fenceTTLArg
}

// channelArg returns channel as a script argument: the one made once for
// the usual wake channel.
func (h *Handle) channelArg(channel string) any {
	if channel == h.wake {
		return h.wakeArg
	}
	return channel
}

// durationArg returns d in ms as a script argument: the one made once for
// the waiter timeout.
func (h *Handle) durationArg(d time.Duration) any {
	if d == h.Cfg.WaiterTimeout {
		return h.waiterTOArg
	}
	return Ms(d)
}

// QueryArgs returns the arguments of a primitive's inspect script for
// owner: the argument header (see codec), with the owner and the fence ttl
// (its keys end with the fence key), then args. An inspection draws the
// token of a plain hold, so that the state it reports names the hold by
// its token (see ForceUnlockToken).
func (h *Handle) QueryArgs(owner string, args ...any) []any {
	hd := codec.Header{Owner: owner, FenceTTL: h.fenceArg(true)}
	return append(hd.Append(make([]any, 0, codec.HeaderLen+len(args))), args...)
}

// Companion returns the key of the companion suffix of the main key.
func (h *Handle) Companion(suffix string) string { return h.Key + ":" + suffix }

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Check reports a handle that cannot be used: the zero value, or one made
// with invalid arguments.
func (h *Handle) Check() error {
	if h.Key == "" && h.err == nil {
		return fmt.Errorf("%w: zero value; use New", dsync.ErrInvalidBackend)
	}
	return h.err
}

// Begin checks h and ctx before an operation with I/O, and returns the
// error to report, wrapped, or nil.
func (h *Handle) Begin(op string, ctx context.Context) error {
	if err := h.Check(); err != nil {
		return err
	}
	return h.Wrap(op, ctx.Err())
}

// Wrap names the operation and the primitive in err, once. A script's
// report of a key that dsync did not write, or of the wrong type, is made
// to match dsync.ErrUnexpectedReply.
func (h *Handle) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if Foreign(err) {
		err = fmt.Errorf("%w: %w", dsync.ErrUnexpectedReply, err)
	}
	return fmt.Errorf("%s %q: %s: %w", h.Kind, truncate(h.Name), op, err)
}

// Foreign reports whether err is a script's report of a key that dsync did
// not write, or of the wrong type, which Wrap makes match
// dsync.ErrUnexpectedReply.
func Foreign(err error) bool {
	var se *backend.ServerError
	if !errors.As(err, &se) || errors.Is(err, dsync.ErrUnexpectedReply) {
		return false
	}
	return strings.Contains(se.Message, "DSYNC unexpected value") || strings.Contains(se.Message, "WRONGTYPE")
}

// Current returns the hold of role that a query with ctx refers to: ctx's
// owner's hold kept by h's session, or with no owner in ctx, the newest
// ownerless hold taken through h. It returns the owner, and a nil lease if
// there is no such hold; a lost ownerless hold is returned until it is
// released.
func (h *Handle) Current(ctx context.Context, role string) (string, *lease.Lease) {
	if id, ok := dsync.OwnerFrom(ctx); ok {
		if s := h.existing(); s != nil {
			return id, s.Sched.Find(h.Key, id, role)
		}
		return id, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if as := h.anon[role]; len(as) > 0 {
		l := as[len(as)-1]
		return l.Owner(), l
	}
	return "", nil
}

// Take returns the hold of role that a release with ctx refers to, as
// Current does, except that with no owner in ctx it takes the oldest
// ownerless hold off the handle.
func (h *Handle) Take(ctx context.Context, role string) (string, *lease.Lease) {
	if _, ok := dsync.OwnerFrom(ctx); ok {
		return h.Current(ctx, role)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	as := h.anon[role]
	if len(as) == 0 {
		return "", nil
	}
	l := as[0]
	copy(as, as[1:])
	as[len(as)-1] = nil
	h.anon[role] = as[:len(as)-1]
	return l.Owner(), l
}

// NotHeld returns the error of a release of role by owner that finds no
// hold through h: ErrNotHeld, saying so when another backend value of the
// process keeps the owner's hold.
func (h *Handle) NotHeld(op, owner, role string) error {
	if owner != "" && h.Session().Holding(h.Key, owner, role) {
		return h.Wrap(op, fmt.Errorf("%w: %w", dsync.ErrNotHeld, errElsewhere))
	}
	return h.Wrap(op, dsync.ErrNotHeld)
}

// Grant is what a successful acquisition reports.
type Grant struct {
	Count int64  // the owner's holds now
	Token int64  // the fencing token
	ID    string // the hold's id on the server
	Sent  time.Time
	TTL   time.Duration // the hold's lease left on the server after the acquisition

	// OwnerArg, IDArg and PlainArg, if set, are the owner, the hold id
	// and the hold's plain value as the script arguments the acquisition
	// made (see lease.Spec).
	OwnerArg, IDArg, PlainArg any
}

// HoldSpec is what Keep needs to keep a hold alive. A primitive makes it
// once per handle.
type HoldSpec struct {
	Role    string
	Channel string          // the wake-up channel, for waiters queued behind the hold
	Renew   *backend.Script // the batched renewal script (see lease.Spec)
	Keys    []string        // of one hold, for Renew
	Extra   []any           // of one hold, for Renew, after its owner, lease ms and hold id

	// Token, if set, draws the fencing token of a hold that has none yet
	// (a plain hold, see codec.lua), with TokenKeys (the main key first,
	// the fence key last) and the argument header; TokenScript is the
	// exclusive hold's.
	Token     *backend.Script
	TokenKeys []string
}

// Keep records a successful acquisition of units (1, or a semaphore's
// permits) by owner: the hold it started, or a re-entry, which extends the
// lease of the hold it re-entered. An ownerless hold is remembered by the
// handle unless remember is false.
func (h *Handle) Keep(owner string, anon bool, g Grant, hs *HoldSpec, units int64, remember bool) *lease.Lease {
	spec := lease.Spec{
		Key:     h.Key,
		Owner:   owner,
		Role:    hs.Role,
		ID:      g.ID,
		Name:    h.Name,
		Channel: hs.Channel,
		TTL:     h.Cfg.Lease,
		Token:   g.Token,

		OwnerArg: g.OwnerArg,
		IDArg:    g.IDArg,
		PlainArg: g.PlainArg,

		Renew:  hs.Renew,
		Keys:   hs.Keys,
		Extra:  hs.Extra,
		Fixed:  !h.Cfg.Watchdog,
		Margin: h.Cfg.ExpiryMargin,
		Logger: h.Cfg.Logger,
	}
	if spec.Fixed && g.TTL > 0 && g.TTL < spec.TTL {
		// A fixed lease handed over shorter than asked ends when the
		// server says.
		spec.TTL = g.TTL
	}
	if o := h.Observer(); o != nil && o.HoldEnded != nil {
		kind, name, role, sent := h.Kind, h.Name, hs.Role, g.Sent
		spec.Ended = func(lost bool, reason string) {
			o.ReportHoldEnded(observe.HoldEnd{Primitive: kind, Name: name, Role: role, Held: time.Since(sent), Lost: lost, Reason: reason})
		}
	}
	var l *lease.Lease
	for l == nil {
		if l = h.Session().Sched.Keep(spec, g.Sent, g.TTL, units); l == nil {
			// The session is retiring (its scheduler refused, the
			// session not marked yet): let the retirement finish
			// rather than spin against it.
			runtime.Gosched()
		}
	}
	if anon && remember {
		h.mu.Lock()
		if h.anon == nil {
			h.anon = make(map[string][]*lease.Lease)
		}
		h.anon[hs.Role] = append(h.anon[hs.Role], l)
		h.mu.Unlock()
	}
	return l
}

// ForceSpec describes a primitive's force script, which frees it
// whoever holds it and passes it on: it takes the argument header (of
// which the channel, the hub id and the entry ttl count), then the fencing
// token of the hold to take (” for whichever), then Args, and replies
// {the holds it took, 0 if none; their ids, space-separated, ...} with the
// waiters it handed the primitive to (see codec.HandOffReply).
type ForceSpec struct {
	Script   *backend.Script
	Keys     []string
	Channel  string
	EntryTTL time.Duration
	Args     []any
	Fence    bool // Keys end with the fence key (see LockSpec.Fence)
}

// ForceUnlockToken is ForceUnlock for the hold with the given fencing
// token only; a token that no hold can have is ErrNotHeld, before any I/O.
func (h *Handle) ForceUnlockToken(ctx context.Context, token int64, f *ForceSpec) (bool, error) {
	if token <= 0 {
		if err := h.Check(); err != nil {
			return false, err
		}
		return false, h.Wrap("force unlock", fmt.Errorf("%w: fencing token %d", dsync.ErrNotHeld, token))
	}
	return h.ForceUnlock(ctx, token, f)
}

// ForceUnlock runs a primitive's force script, with token (0 for
// whichever hold) as its condition, and reports whether it took a hold.
// ForceUnlockToken is the form with a token that must be given. The lease
// of the hold it took, if a session of this process keeps it, ends as
// lost at once: its holder learns it even on a fixed lease that no
// renewal would check.
func (h *Handle) ForceUnlock(ctx context.Context, token int64, f *ForceSpec) (bool, error) {
	if err := h.Begin("force unlock", ctx); err != nil {
		return false, err
	}
	cond := ""
	if token > 0 {
		cond = strconv.FormatInt(token, 10)
	}
	hd := codec.Header{Channel: h.channelArg(f.Channel), Hub: h.HubID(), EntryTTL: h.durationArg(f.EntryTTL), FenceTTL: h.fenceArg(f.Fence)}
	args := hd.Append(make([]any, 0, codec.HeaderLen+1+len(f.Args)))
	args = append(args, cond)
	args = append(args, f.Args...)
	r, err := h.HandOff(ctx, f.Channel, f.Script, f.Keys, args...)
	if err != nil {
		return false, h.Wrap("force unlock", err)
	}
	if r.N > 0 {
		for _, id := range strings.Fields(r.HoldID) {
			h.LoseHold(id, "taken by ForceUnlock")
		}
	}
	return r.N > 0, nil
}

// LoseHold ends as lost, in every session of the process, the lease of
// the hold of h's primitive with the given id: a script through h took it.
func (h *Handle) LoseHold(id, reason string) {
	h.Session() // so that a waiter of h's session handed the hold is told
	session.LoseHold(h.Key, id, reason)
}

// HandOff runs a script that may hand the primitive to waiters (see
// wait.HandOff) through h's session. For a primitive whose waiters queue
// in the session (LockSpec.Local), a hold handed to a waiter of the
// session is pending until the waiter keeps it (see lease.Scheduler.Pending).
func (h *Handle) HandOff(ctx context.Context, channel string, s *backend.Script, keys []string, args ...any) (wait.Reply, error) {
	return wait.HandOff(ctx, h.B, h.Session().Hub, channel, h.handed, s, keys, args...)
}

// QueueLocally makes the waiters of h's session queue behind its holds of
// role, pending ones included (see LockSpec.Local), whose wake-up channel
// is channel and which a hand-off gives for handed. A primitive calls it
// once, from its constructor.
func (h *Handle) QueueLocally(role, channel string, handed time.Duration) {
	h.handed = func(id, owner string, token int64, gone bool) {
		if gone {
			h.Session().Sched.DropPending(h.Key, id)
			return
		}
		h.Session().Sched.Pending(h.Key, owner, role, id, channel, token, handed)
	}
}

// Header returns the argument header (see codec.Header) of a script that
// h's primitive calls itself, for waiters on channel: the channel, the hub
// id of h's session and the waiter timeout filled in. The primitive fills
// in what is its own: the owner, the operation, the hold, the entry.
func (h *Handle) Header(channel string) codec.Header {
	return codec.Header{Channel: h.channelArg(channel), Hub: h.HubID(), EntryTTL: h.waiterTOArg}
}

// HubID returns the id of the hub of h's session, as a script argument,
// which a script that may hand the primitive to waiters is told: it leaves
// the wake-ups of that hub's waiters to its caller.
func (h *Handle) HubID() any { return h.Session().Hub.IDArg() }

// Token returns the fencing token of the hold of role that ctx refers to
// (see Current). A hold whose token was not drawn yet (a plain hold, see
// codec.lua) has it drawn by hs.Token, one round trip the first time;
// otherwise Token does no I/O.
func (h *Handle) Token(ctx context.Context, hs *HoldSpec) (int64, error) {
	if err := h.Check(); err != nil {
		return 0, err
	}
	_, l := h.Current(ctx, hs.Role)
	switch {
	case l == nil:
		return 0, h.Wrap("token", dsync.ErrNotHeld)
	case l.Lost():
		return 0, h.Wrap("token", fmt.Errorf("%w: %w", dsync.ErrNotHeld, ErrLost))
	}
	return h.LeaseToken(ctx, l, hs)
}

// LeaseToken is Token for the hold that l keeps, known to be on: its
// token, drawn by hs.Token if the hold has none yet.
func (h *Handle) LeaseToken(ctx context.Context, l *lease.Lease, hs *HoldSpec) (int64, error) {
	if t := l.Token(); t > 0 || hs.Token == nil {
		return t, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, h.Wrap("token", err)
	}
	owner, id, plain := l.Args()
	hd := codec.Header{Owner: owner, HoldID: id, Plain: plain, FenceTTL: h.fenceArg(true)}
	reply, err := h.B.Eval(ctx, hs.Token, hs.TokenKeys, hd.Append(nil)...)
	if err != nil {
		return 0, h.Wrap("token", err)
	}
	t, err := backend.Int(reply)
	switch {
	case err != nil:
		return 0, h.Wrap("token", err)
	case t == 0:
		return 0, h.Wrap("token", fmt.Errorf("%w: %w: %w", dsync.ErrNotHeld, ErrLost, errGone))
	}
	l.SetToken(t)
	return l.Token(), nil
}

// Done returns the lost signal of the hold of role that ctx refers to (see
// Current): a channel closed when the hold ends, lost or released. With no
// such hold it is already closed.
func (h *Handle) Done(ctx context.Context, role string) <-chan struct{} {
	if h.Check() == nil {
		if _, l := h.Current(ctx, role); l != nil {
			return l.Done()
		}
	}
	return closed
}

var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Ms returns d in whole milliseconds, as scripts take durations.
func Ms(d time.Duration) int64 { return d.Milliseconds() }

// MsArg returns d in whole milliseconds as a script argument in decimal.
func MsArg(d time.Duration) any { return strconv.FormatInt(d.Milliseconds(), 10) }

// Flag returns "1" or "0", as scripts take booleans.
func Flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ctxError makes err, which ended an operation after ctx was done, match
// ctx's error, with err's text.
func ctxError(cerr, err error) error { return fmt.Errorf("%w (%v)", cerr, err) }
