package mutex

import (
	"log/slog"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/options"
	"github.com/dsyncgo/dsync/observe"
)

const (
	// waiterTTL is how long a waiter's registration outlives its last
	// attempt; heartbeat, the longest a waiter sleeps between attempts,
	// keeps a live waiter's entry fresh. A waiter that died may be handed
	// the mutex until its entry expires; each time, that costs the others
	// the hand-off lease, noticed within a heartbeat.
	waiterTTL = 15 * time.Second
	heartbeat = 5 * time.Second

	// DefaultHandoffAfter is the hand-off threshold (see "Two modes" in
	// the package documentation and WithHandoffAfter): 1ms, the wait
	// after which Go's sync.Mutex switches to starvation mode.
	DefaultHandoffAfter = time.Millisecond

	// shortWindow is how many thresholds a woken head lets short holds
	// pass (short_window in exclusive.lua): past them, a release through
	// the session that woke it looks at the queue (core.ReleaseSpec.LookArgs).
	shortWindow = 3
)

// An Option configures a Mutex.
type Option struct{ apply func(*options.Common) }

// WithLease makes every hold expire d after it was acquired, with no
// renewal. A holder that needs longer must finish or lose the mutex; Done
// reports the expiry. d must be at least 1ms.
func WithLease(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetLease(d) }}
}

// WithWatchdog sets the lease that the watchdog renews while the mutex is
// held, every d/3. The default is 30s, so a holder that crashes frees the
// mutex within 30s. d must be at least 1ms.
func WithWatchdog(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetWatchdog(d) }}
}

// WithExpiryMargin sets how long before a hold's expiry on the server its
// holder gives it up: Done closes, and renewals stop, d before the lease
// ends as measured from when the acquiring (or last renewing) call was
// sent. The margin covers a server clock that runs fast and a timer that
// fires late, so that no other owner can acquire the mutex before Done has
// told the holder. The default is 1% of the lease plus 2ms (the drift
// allowance of the RedLock algorithm): 302ms for the 30s watchdog lease,
// 12ms for a 1s fixed lease. d must not be negative, and must be less
// than half the lease.
func WithExpiryMargin(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetExpiryMargin(d) }}
}

// WithHandoffAfter sets the hand-off threshold d (see "Two modes" in the
// package documentation): the release of a hold of d or longer hands the
// mutex to a head waiter that has waited d since it queued; a woken head
// lets holds shorter than d pass for 3·d, after which a release hands the
// mutex to it. The default is DefaultHandoffAfter; 0 hands the mutex over
// on every release with a waiter, which serves waiters in turn. d must not
// be negative.
func WithHandoffAfter(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetHandoffAfter(d) }}
}

// WithObserver sets the observer of this handle's acquisitions, holds
// and waiters (see package observe), instead of its backend's. The
// default is the backend's observer, if observe.Set gave it one.
func WithObserver(o *observe.Observer) Option {
	return Option{func(c *options.Common) { c.Observer = o }}
}

// WithPrefix sets the first part of every key and channel name; the
// default is "dsync". It must not be empty or contain braces.
func WithPrefix(p string) Option {
	return Option{func(c *options.Common) { c.Prefix = p }}
}

// WithLogger sets where background events are logged: a hold lost (Warn)
// and lease renewals retried (Debug). The default is slog.Default(); nil
// discards them.
func WithLogger(l *slog.Logger) Option {
	return Option{func(c *options.Common) { c.SetLogger(l) }}
}

// A Mutex is a reentrant mutual exclusion lock shared through a
// Redis-compatible server. Create one with New; the zero value is not
// usable. A Mutex is safe for concurrent use, and any number of Mutex
// values, in any number of processes, may refer to the same name.
type Mutex struct {
	h core.Handle

	channel string
	keys    []string // of every script: the lock key, the queue and its expiry
	spec    core.LockSpec
	hold    core.HoldSpec
	release core.ReleaseSpec
	force   core.ForceSpec
	after   []any // the hand-off threshold in ms, the scripts' own argument
}

var (
	_ sync.Locker  = (*Mutex)(nil)
	_ dsync.Locker = (*Mutex)(nil)
)

// New returns a handle on the mutex called name on b. It does no I/O. Bad
// arguments (a nil backend, an empty name or one over 1 KiB, a lease under
// 1ms, a bad prefix) are reported, matching dsync.ErrInvalidBackend,
// ErrInvalidName or ErrInvalidLease, by every call on the handle;
// Lock and Unlock panic with them.
func New(b backend.Backend, name string, opts ...Option) *Mutex {
	cfg := options.Defaults()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.HandoffAfter < 0 {
		cfg.HandoffAfter = DefaultHandoffAfter
	}
	cfg.WaiterTimeout = waiterTTL
	m := &Mutex{}
	m.h.Init(b, "mutex", name, cfg)
	m.channel = m.h.Companion("wake")
	m.keys = []string{m.h.Key, m.h.Companion("queue"), m.h.Companion("expiry"), m.h.Companion("fence")}
	m.after = []any{core.MsArg(cfg.HandoffAfter)}
	m.h.QueueLocally(core.Exclusive, m.channel, m.handedLease())
	m.hold = core.HoldSpec{Role: core.Exclusive, Channel: m.channel, Renew: renewScript, Keys: m.keys[:1],
		Token: core.TokenScript, TokenKeys: []string{m.keys[0], m.keys[3]}}
	m.spec = core.LockSpec{
		Role:      core.Exclusive,
		Channel:   m.channel,
		Heartbeat: heartbeat,
		Handed:    m.handedLease(),
		EntryTTL:  waiterTTL,
		Keys:      m.keys,
		Acquire:   acquireScript,
		Abandon:   abandonScript,
		Args:      m.after,
		Fence:     true,
		Hold:      &m.hold,
		// The mutex promises no order: anyone takes it when free, with a
		// plain SET where the backend can, and waiters queue behind holds
		// of their session.
		Plain: true,
		Local: true,
	}
	m.release = core.ReleaseSpec{Script: releaseScript, Keys: m.keys, Channel: m.channel, EntryTTL: waiterTTL, Fence: true, Local: true,
		Args: []any{m.after[0], "0"}, ShortArgs: []any{m.after[0], "1"}, Short: cfg.HandoffAfter,
		LookArgs: []any{m.after[0], "2"}, LookAfter: shortWindow * cfg.HandoffAfter}
	m.force = core.ForceSpec{Script: forceScript, Keys: m.keys, Channel: m.channel, EntryTTL: waiterTTL, Args: m.after, Fence: true}
	return m
}

// Name returns the name the mutex was created with.
func (m *Mutex) Name() string { return m.h.Name }
