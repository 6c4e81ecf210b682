package election

import (
	"log/slog"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/options"
	"github.com/dsyncgo/dsync/observe"
)

const (
	// DefaultWaiterTimeout is how long a candidate's place in the queue
	// outlives its last heartbeat unless WithWaiterTimeout says otherwise.
	DefaultWaiterTimeout = 5 * time.Second
)

// An Option configures an Election.
type Option struct{ apply func(*options.Common) }

// WithLease makes every term expire d after it began, with no renewal: a
// leader that needs longer must campaign again. Done reports the expiry.
// d must be at least 1ms.
func WithLease(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetLease(d) }}
}

// WithWatchdog sets the lease that the watchdog renews while a term is on,
// every d/3. The default is 30s, so the leader's process crashing ends its
// term within 30s. d must be at least 1ms.
func WithWatchdog(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetWatchdog(d) }}
}

// WithWaiterTimeout sets how long a candidate's place in the queue
// outlives its last heartbeat; candidates beat every third of it, so a
// live one keeps its place however long it waits, and one whose process
// died is skipped at most d after its last beat. The default is
// DefaultWaiterTimeout, 5s. d must be at least 10ms.
func WithWaiterTimeout(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetWaiterTimeout(d) }}
}

// WithFenceTTL sets how long the election keeps its last fencing token,
// and the number of its latest change, on the server after the last term
// began or changed: tokens keep increasing across a pause shorter than
// that without reading the server's clock (see package mutex). The
// default is an hour; d must be at least 1s.
func WithFenceTTL(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetFenceTTL(d) }}
}

// WithExpiryMargin sets how long before a term's expiry on the server its
// leader gives it up (Done closes); see the mutex package's option of the
// same name. The default is 1% of the lease plus 2ms; d must not be
// negative, and must be less than half the lease.
func WithExpiryMargin(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetExpiryMargin(d) }}
}

// WithObserver sets the observer of this handle's campaigns, terms and
// candidates (see package observe), instead of its backend's. The default
// is the backend's observer, if observe.Set gave it one.
func WithObserver(o *observe.Observer) Option {
	return Option{func(c *options.Common) { c.Observer = o }}
}

// WithPrefix sets the first part of every key and channel name; the
// default is "dsync". It must not be empty or contain braces.
func WithPrefix(p string) Option {
	return Option{func(c *options.Common) { c.Prefix = p }}
}

// WithLogger sets where background events are logged: a term lost (Warn),
// a server that cannot be reached while campaigning or observing (Warn;
// an observer's failure that goes on is logged again when its cause
// changes and once a minute, and its end at Info), lease renewals
// retried (Debug). The default is slog.Default(); nil discards them.
func WithLogger(l *slog.Logger) Option {
	return Option{func(c *options.Common) { c.SetLogger(l) }}
}

// hint is what a plain campaign publishes to observers, which read the
// state on a message they cannot parse (see lua/term.lua).
const hint = "term"

// An Election is a handle on a leader election shared through a
// Redis-compatible server. Create one with New; the zero value is not
// usable. An Election is safe for concurrent use, and any number of
// Election values, in any number of processes, may refer to the same
// name.
type Election struct {
	h core.Handle

	queue, expiry, values, leader string
	wake, observe                 string // channels
	keys                          []string
	hold                          core.HoldSpec

	// spec is what every campaign's acquisition shares, each a fresh
	// owner's; a campaign adds its value (Args).
	spec    core.LockSpec
	release core.ReleaseSpec
	force   core.ForceSpec
}

// New returns a handle on the election called name on b. It does no I/O.
// Bad arguments (a nil backend, an empty name or one over 1 KiB, a lease
// under 1ms, a bad prefix) are reported, matching dsync.ErrInvalidBackend,
// ErrInvalidName or ErrInvalidLease, by every call on the handle, before
// any I/O; Observe closes its channel at once.
func New(b backend.Backend, name string, opts ...Option) *Election {
	cfg := options.Defaults()
	cfg.WaiterTimeout = DefaultWaiterTimeout
	for _, o := range opts {
		o.apply(&cfg)
	}
	e := &Election{}
	e.h.Init(b, "election", name, cfg)
	e.queue = e.h.Companion("queue")
	e.expiry = e.h.Companion("expiry")
	e.values = e.h.Companion("values")
	e.leader = e.h.Companion("leader")
	e.wake = e.h.Companion("wake")
	e.observe = e.h.Companion("observe")
	e.keys = []string{e.h.Key, e.queue, e.expiry, e.values, e.leader}
	e.hold = core.HoldSpec{Role: core.Exclusive, Channel: e.wake, Renew: renewScript, Keys: []string{e.h.Key, e.leader},
		Token: tokenScript, TokenKeys: e.keys}
	// No core.Local: queueing in the process first would reorder
	// candidates.
	e.spec = core.LockSpec{
		Role:      core.Exclusive,
		Channel:   e.wake,
		Heartbeat: e.h.Cfg.WaiterTimeout / 3,
		Handed:    e.h.HandedLease(),
		EntryTTL:  e.h.Cfg.WaiterTimeout,
		Keys:      e.keys,
		Acquire:   acquireScript,
		Abandon:   abandonScript,
		Hold:      &e.hold,
		Op:        "campaign",
		Fresh:     true,
		// A plain campaign (see Campaign): its term carries the lease
		// and the fence ttl that its first read needs.
		Plain:       true,
		PlainFields: []int64{core.Ms(e.h.Cfg.Lease), core.Ms(e.h.Cfg.FenceTTL)},
		Announce:    e.observe,
		Hint:        hint,
	}
	e.release = core.ReleaseSpec{Script: releaseScript, Keys: e.keys, Channel: e.wake, EntryTTL: e.h.Cfg.WaiterTimeout,
		Args: []any{core.MsArg(e.h.Cfg.FenceTTL), e.observe}}
	e.force = core.ForceSpec{Script: forceScript, Keys: e.keys, Channel: e.wake, EntryTTL: e.h.Cfg.WaiterTimeout,
		Args: []any{core.MsArg(e.h.Cfg.FenceTTL), e.observe}}
	return e
}

// Name returns the name the election was created with.
func (e *Election) Name() string { return e.h.Name }
