// Package core is the lock core that dsync's primitives share: a handle's
// name, keys and options, owner resolution, holds (owned and ownerless),
// hold start and extension, fencing token and lost-signal lookup, the
// release loop and the acquisition loop. A primitive built on it is its
// Lua scripts and its semantics.
//
// # Holds
//
// A hold belongs to an owner, not to a handle or a backend value: the
// lease package indexes the holds of the process by main key, owner and
// role, and any handle on the same name finds its owner's hold there.
// Every hold has an id on the server (the operation id of the acquisition
// that started it), so that a release sent through one backend value is
// applied to the lease kept through another only when it released that
// very hold, and never to a hold of the same name on another server.
//
// An ownerless acquisition (a ctx without dsync.WithOwner) takes a hold
// for a fresh owner, which the handle remembers, oldest first. An
// ownerless release or query refers to those: a release takes the oldest,
// so that a late release by a goroutine whose hold was lost finds its own
// lost hold, not the next holder's; a query looks at the newest.
package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/options"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/observe"
)

// Exclusive is the role of a hold that excludes every other.
const Exclusive = "x"

// ErrLost is wrapped, with dsync.ErrNotHeld, in the errors about a hold
// that was lost.
var ErrLost = errors.New("the hold was lost")

// Handle is what every primitive's handle embeds: the backend, the name,
// the options and the primitive's main key, and the ownerless holds taken
// through it. Its zero value reports an error from every call.
type Handle struct {
	B    backend.Backend
	Kind string // "mutex", "fairlock", ...
	Name string
	Cfg  options.Common
	Key  string // the main key; companions append ":" and a suffix

	err error // invalid arguments, reported by every call

	mu   sync.Mutex
	anon map[string][]*lease.Lease // ownerless holds by role, oldest first
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
	if h.err != nil {
		h.err = fmt.Errorf("%s %q: %w", kind, truncate(name), h.err)
	}
}

// Observer returns the observer of h's acquisitions, holds and waiters:
// its own (WithObserver), or its backend's (observe.Set), or nil.
func (h *Handle) Observer() *observe.Observer {
	if h.Cfg.Observer != nil {
		return h.Cfg.Observer
	}
	return observe.For(h.B)
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
	if foreign(err) {
		err = fmt.Errorf("%w: %w", dsync.ErrUnexpectedReply, err)
	}
	return fmt.Errorf("%s %q: %s: %w", h.Kind, truncate(h.Name), op, err)
}

func foreign(err error) bool {
	var se *backend.ServerError
	if !errors.As(err, &se) || errors.Is(err, dsync.ErrUnexpectedReply) {
		return false
	}
	return strings.Contains(se.Message, "DSYNC unexpected value") || strings.Contains(se.Message, "WRONGTYPE")
}

// LockOwner returns the owner an acquisition with ctx is made for: ctx's
// owner, or a fresh one for an ownerless hold.
func LockOwner(ctx context.Context) (owner string, anon bool) {
	if id, ok := dsync.OwnerFrom(ctx); ok {
		return id, false
	}
	return dsync.NewID(), true
}

// Current returns the hold of role that a query with ctx refers to: ctx's
// owner's hold on h's server (kept through h's backend, or through another
// backend value of the process known to reach the same server), or with no
// owner in ctx, the newest ownerless hold taken through h. It returns the
// owner, and a nil lease if there is no such hold; a lost ownerless hold is
// returned until it is released.
func (h *Handle) Current(ctx context.Context, role string) (string, *lease.Lease) {
	if id, ok := dsync.OwnerFrom(ctx); ok {
		if ls := lease.Find(h.B, h.Key, id, role); len(ls) > 0 {
			return id, ls[0]
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
// Current does, with two differences. With no owner in ctx it takes the
// oldest ownerless hold off the handle. With an owner that has no hold
// known to be on h's server, it returns one kept through any backend value
// of the process: the release is sent through h's backend, and applied to
// that hold only if the server names its id.
func (h *Handle) Take(ctx context.Context, role string) (string, *lease.Lease) {
	if id, ok := dsync.OwnerFrom(ctx); ok {
		if _, l := h.Current(ctx, role); l != nil {
			return id, l
		}
		if ls := lease.Anywhere(h.Key, id, role); len(ls) > 0 {
			return id, ls[len(ls)-1]
		}
		return id, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	as := h.anon[role]
	if len(as) == 0 {
		return "", nil
	}
	l := as[0]
	as[0] = nil
	h.anon[role] = as[1:]
	return l.Owner(), l
}

// Grant is what a successful acquisition reports.
type Grant struct {
	Count int64  // the owner's holds now
	Token int64  // the fencing token
	ID    string // the hold's id on the server
	Sent  time.Time
	TTL   time.Duration // the hold's lease left on the server after the acquisition
}

// HoldSpec is what Keep needs to keep a hold alive.
type HoldSpec struct {
	Role  string
	Renew *backend.Script // nil for a fixed lease
	Keys  []string        // of one hold, for Renew
	Args  []any           // of one hold, for Renew, after its owner, lease ms and hold id
}

// Keep records a successful acquisition of owner: the hold it started, or
// a re-entry, which extends the lease of the hold it re-entered, whichever
// backend value of the process keeps it. An ownerless hold is remembered
// by the handle.
func (h *Handle) Keep(owner string, anon bool, g Grant, hs HoldSpec) *lease.Lease {
	l := keepHold(h, owner, g, hs)
	if anon {
		h.mu.Lock()
		if h.anon == nil {
			h.anon = make(map[string][]*lease.Lease)
		}
		h.anon[hs.Role] = append(h.anon[hs.Role], l)
		h.mu.Unlock()
	}
	return l
}

// keeping makes finding a hold's lease and starting one if there is none
// one step: two goroutines of one owner acquiring the same hold at once
// (a semaphore's hand-offs to both) must not start two leases for it, or
// the second, left behind when the first is released, is taken by a later
// release for the owner's hold.
var keeping sync.Mutex

// keepHold returns the lease of the hold g, extended, or a new one.
func keepHold(h *Handle, owner string, g Grant, hs HoldSpec) *lease.Lease {
	keeping.Lock()
	defer keeping.Unlock()
	l := lease.ByID(h.Key, owner, hs.Role, g.ID)
	if l != nil && !l.Lost() {
		// A re-entry: the server kept the hold's expiry, or extended
		// it, and h's backend is now known to reach the hold's server.
		l.Extend(g.Sent, g.TTL)
		l.Reach(h.B)
	} else {
		spec := lease.Spec{
			Key:    h.Key,
			Owner:  owner,
			Role:   hs.Role,
			ID:     g.ID,
			Name:   h.Name,
			TTL:    h.Cfg.Lease,
			Token:  g.Token,
			Keys:   hs.Keys,
			Args:   append([]any{owner, Ms(h.Cfg.Lease), g.ID}, hs.Args...),
			Margin: h.Cfg.ExpiryMargin,
			Logger: h.Cfg.Logger,
		}
		if o := h.Observer(); o != nil && o.HoldEnded != nil {
			kind, name, role, sent := h.Kind, h.Name, hs.Role, g.Sent
			spec.Ended = func(lost bool, reason string) {
				o.ReportHoldEnded(observe.HoldEnd{Primitive: kind, Name: name, Role: role, Held: time.Since(sent), Lost: lost, Reason: reason})
			}
		}
		if h.Cfg.Watchdog {
			spec.Renew = hs.Renew
			if g.TTL > 0 && g.TTL < h.Cfg.Lease {
				spec.Initial = g.TTL
			}
		} else {
			// A fixed lease is only ever checked: its lease argument is
			// 0, which the renewal scripts take as "change nothing".
			spec.Check = hs.Renew
			spec.Args[1] = int64(0)
			if g.TTL > 0 && g.TTL < h.Cfg.Lease {
				spec.TTL = g.TTL
			}
		}
		l = lease.Start(h.B, spec, g.Sent)
	}
	return l
}

// ForceUnlockToken is ForceUnlock for the hold with the given fencing
// token only; a token that no hold can have is ErrNotHeld, before any I/O.
func (h *Handle) ForceUnlockToken(ctx context.Context, token int64, send func(ctx context.Context, token string) (wait.Reply, error)) (bool, error) {
	if token <= 0 {
		if err := h.Check(); err != nil {
			return false, err
		}
		return false, h.Wrap("force unlock", fmt.Errorf("%w: fencing token %d", dsync.ErrNotHeld, token))
	}
	return h.ForceUnlock(ctx, token, send)
}

// Observed records that a reply through h's backend named the hold with
// the given id, held by owner in role: if the process keeps it through
// another backend value, h's is now known to reach its server.
func (h *Handle) Observed(owner, role, id string) {
	if l := lease.ByID(h.Key, owner, role, id); l != nil {
		l.Reach(h.B)
	}
}

// ForceUnlock runs a primitive's force script through send, with token
// (0 for whichever hold) as its condition, and reports whether it took a
// hold. ForceUnlockToken is the form with a token that must be given. The lease of the hold it took, if this process keeps it, ends as
// lost at once: its holder learns it even on a fixed lease that no renewal
// would check.
func (h *Handle) ForceUnlock(ctx context.Context, token int64, send func(ctx context.Context, token string) (wait.Reply, error)) (bool, error) {
	if err := h.Begin("force unlock", ctx); err != nil {
		return false, err
	}
	cond := ""
	if token > 0 {
		cond = strconv.FormatInt(token, 10)
	}
	r, err := send(ctx, cond)
	if err != nil {
		return false, h.Wrap("force unlock", err)
	}
	if r.N == 1 {
		lease.LoseHold(h.Key, r.HoldID, "taken by ForceUnlock")
	}
	return r.N == 1, nil
}

// Token returns the fencing token of the hold of role that ctx refers to
// (see Current), without I/O.
func (h *Handle) Token(ctx context.Context, role string) (int64, error) {
	if err := h.Check(); err != nil {
		return 0, err
	}
	_, l := h.Current(ctx, role)
	switch {
	case l == nil:
		return 0, h.Wrap("token", dsync.ErrNotHeld)
	case l.Lost():
		return 0, h.Wrap("token", fmt.Errorf("%w: %w", dsync.ErrNotHeld, ErrLost))
	}
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

// Flag returns "1" or "0", as scripts take booleans.
func Flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ctxError makes err, which ended an operation after ctx was done, match
// ctx's error too.
func ctxError(cerr, err error) error { return fmt.Errorf("%w (%w)", cerr, err) }
