package fairlock

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
	// DefaultWaiterTimeout is how long a waiter's place in the queue
	// outlives its last heartbeat unless WithWaiterTimeout says otherwise.
	DefaultWaiterTimeout = 5 * time.Second
)

// An Option configures a Mutex.
type Option struct{ apply func(*options.Common) }

// WithLease makes every hold expire d after it was acquired, with no
// renewal. A holder that needs longer must finish or lose the lock; Done
// reports the expiry. d must be at least 1ms.
func WithLease(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetLease(d) }}
}

// WithWatchdog sets the lease that the watchdog renews while the lock is
// held, every d/3. The default is 30s, so a holder that crashes frees the
// lock within 30s. d must be at least 1ms.
func WithWatchdog(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetWatchdog(d) }}
}

// WithWaiterTimeout sets how long a waiter's place in the queue outlives
// its last heartbeat; waiters beat every third of it, so a live waiter
// keeps its place however long it waits, and one whose process died is
// skipped at most d after its last beat. The default is
// DefaultWaiterTimeout, 5s. d must be at least 10ms.
func WithWaiterTimeout(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetWaiterTimeout(d) }}
}

// WithExpiryMargin sets how long before a hold's expiry on the server its
// holder gives it up (Done closes); see the mutex package's option of the
// same name. The default is 1% of the lease plus 2ms; d must not be
// negative, and must be less than half the lease.
func WithExpiryMargin(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetExpiryMargin(d) }}
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

// WithLogger sets where background events are logged: a hold lost (Warn),
// a server that cannot be reached while waiting (Warn), lease renewals
// retried (Debug). The default is slog.Default(); nil discards them.
func WithLogger(l *slog.Logger) Option {
	return Option{func(c *options.Common) { c.SetLogger(l) }}
}

// A Mutex is a reentrant mutual exclusion lock, shared through a
// Redis-compatible server, that is granted in the order waiters reached
// the server. Create one with New; the zero value is not usable. A Mutex
// is safe for concurrent use, and any number of Mutex values, in any
// number of processes, may refer to the same name.
type Mutex struct {
	h core.Handle

	channel string
	keys    []string // of every script: the lock key, the queue and its expiry
	spec    core.LockSpec
	hold    core.HoldSpec
	release core.ReleaseSpec
	force   core.ForceSpec
}

var (
	_ sync.Locker  = (*Mutex)(nil)
	_ dsync.Locker = (*Mutex)(nil)
)

// New returns a handle on the fair lock called name on b. It does no I/O.
// Bad arguments (a nil backend, an empty name or one over 1 KiB, a lease
// under 1ms, a bad prefix) are reported, matching dsync.ErrInvalidBackend,
// ErrInvalidName or ErrInvalidLease, by every call on the handle; Lock and
// Unlock panic with them.
func New(b backend.Backend, name string, opts ...Option) *Mutex {
	cfg := options.Defaults()
	cfg.WaiterTimeout = DefaultWaiterTimeout
	for _, o := range opts {
		o.apply(&cfg)
	}
	m := &Mutex{}
	m.h.Init(b, "fairlock", name, cfg)
	m.channel = m.h.Companion("wake")
	m.keys = []string{m.h.Key, m.h.Companion("queue"), m.h.Companion("expiry"), m.h.Companion("fence")}
	to := m.h.Cfg.WaiterTimeout
	m.hold = core.HoldSpec{Role: core.Exclusive, Channel: m.channel, Renew: renewScript, Keys: m.keys[:1],
		Token: core.TokenScript, TokenKeys: []string{m.keys[0], m.keys[3]}}
	// No Local: queueing in the process first would reorder waiters.
	// Plain: the lock key exists whenever a live waiter is queued (see
	// a.turn in internal/script/exclusive.lua), so that a plain SET NX
	// takes only a lock nobody is queued for.
	m.spec = core.LockSpec{
		Role:      core.Exclusive,
		Channel:   m.channel,
		Heartbeat: to / 3,
		Handed:    m.h.HandedLease(),
		EntryTTL:  to,
		Keys:      m.keys,
		Acquire:   acquireScript,
		Abandon:   abandonScript,
		Fence:     true,
		Hold:      &m.hold,
		Plain:     true,
	}
	m.release = core.ReleaseSpec{Script: releaseScript, Keys: m.keys, Channel: m.channel, EntryTTL: to, Fence: true}
	m.force = core.ForceSpec{Script: forceScript, Keys: m.keys, Channel: m.channel, EntryTTL: to, Fence: true}
	return m
}

// Name returns the name the lock was created with.
func (m *Mutex) Name() string { return m.h.Name }
