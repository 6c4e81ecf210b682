package rwlock

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
	// DefaultWaiterTimeout is how long a waiter's claim outlives its last
	// heartbeat unless WithWaiterTimeout says otherwise.
	DefaultWaiterTimeout = 5 * time.Second

	// read is the role of a read hold; a write hold's is core.Exclusive.
	read = "r"
)

type config struct {
	options.Common
	preferReaders bool
}

// An Option configures an RWMutex.
type Option struct{ apply func(*config) }

// WithLease makes every hold, read or write, expire d after it was
// acquired, with no renewal. Done and RDone report the expiry. d must be at
// least 1ms.
func WithLease(d time.Duration) Option {
	return Option{func(c *config) { c.SetLease(d) }}
}

// WithWatchdog sets the lease that the watchdog renews while a hold, read
// or write, is held, every d/3. The default is 30s, so a holder that
// crashes frees its hold within 30s while the other readers keep theirs.
// d must be at least 1ms.
func WithWatchdog(d time.Duration) Option {
	return Option{func(c *config) { c.SetWatchdog(d) }}
}

// WithWaiterTimeout sets how long a waiter's claim outlives its last
// heartbeat: a waiting writer's place in the queue, which keeps new
// readers out, and a waiting reader's registration. Waiters beat every
// third of it, so a live waiter keeps its claim however long it waits,
// and one whose process died blocks the others at most d after its last
// beat. The default is DefaultWaiterTimeout, 5s. d must be at least 10ms.
func WithWaiterTimeout(d time.Duration) Option {
	return Option{func(c *config) { c.SetWaiterTimeout(d) }}
}

// WithExpiryMargin sets how long before a hold's expiry on the server its
// holder gives it up (Done closes); see the mutex package's option of the
// same name. The default is 1% of the lease plus 2ms; d must not be
// negative, and must be less than half the lease.
func WithExpiryMargin(d time.Duration) Option {
	return Option{func(c *config) { c.SetExpiryMargin(d) }}
}

// WithObserver sets the observer of this handle's acquisitions, holds
// and waiters (see package observe), instead of its backend's. The
// default is the backend's observer, if observe.Set gave it one.
func WithObserver(o *observe.Observer) Option {
	return Option{func(c *config) { c.Observer = o }}
}

// WithPrefix sets the first part of every key and channel name; the
// default is "dsync". It must not be empty or contain braces.
func WithPrefix(p string) Option {
	return Option{func(c *config) { c.Prefix = p }}
}

// WithLogger sets where background events are logged: a hold lost (Warn),
// a server that cannot be reached while waiting (Warn), lease renewals
// retried (Debug). The default is slog.Default(); nil discards them.
func WithLogger(l *slog.Logger) Option {
	return Option{func(c *config) { c.SetLogger(l) }}
}

// WithReaderPreference lets new readers in while writers wait, as long as
// no write hold is held: read throughput is never held back, but a writer
// waits until no read hold is left, which under a steady stream of
// overlapping readers may be never. The default is writer preference.
// Every handle on a name should agree: each acquisition follows its own
// handle's preference.
func WithReaderPreference() Option {
	return Option{func(c *config) { c.preferReaders = true }}
}

// An RWMutex is a reentrant reader/writer mutual exclusion lock, shared
// through a Redis-compatible server. Create one with New; the zero value
// is not usable. An RWMutex is safe for concurrent use, and any number of
// RWMutex values, in any number of processes, may refer to the same name.
type RWMutex struct {
	h    core.Handle
	pref string // "r" with reader preference, else "w"

	keys    []string // see lua/rw.lua
	channel string

	// The acquisitions, holds and releases of each side, made once.
	write, rd          core.LockSpec
	writeHold, rdHold  core.HoldSpec
	wrelease, rrelease core.ReleaseSpec
	force              core.ForceSpec
}

var (
	_ sync.Locker  = (*RWMutex)(nil)
	_ dsync.Locker = (*RWMutex)(nil)
)

// New returns a handle on the read-write lock called name on b. It does no
// I/O. Bad arguments (a nil backend, an empty name or one over 1 KiB, a
// lease under 1ms, a bad prefix) are reported, matching
// dsync.ErrInvalidBackend, ErrInvalidName or ErrInvalidLease, by every call
// on the handle; Lock, RLock, Unlock and RUnlock panic with them.
func New(b backend.Backend, name string, opts ...Option) *RWMutex {
	cfg := config{Common: options.Defaults()}
	cfg.WaiterTimeout = DefaultWaiterTimeout
	for _, o := range opts {
		o.apply(&cfg)
	}
	m := &RWMutex{pref: "w"}
	if cfg.preferReaders {
		m.pref = "r"
	}
	m.h.Init(b, "rwlock", name, cfg.Common)
	m.keys = []string{m.h.Key, m.h.Companion("readers"), m.h.Companion("rexpiry"),
		m.h.Companion("wqueue"), m.h.Companion("wexpiry"), m.h.Companion("rwait"), m.h.Companion("fence")}
	m.channel = m.h.Companion("wake")
	m.write, m.writeHold = m.spec(core.Exclusive)
	m.rd, m.rdHold = m.spec(read)
	m.write.Hold, m.rd.Hold = &m.writeHold, &m.rdHold
	to, pref := m.h.Cfg.WaiterTimeout, []any{m.pref}
	m.wrelease = core.ReleaseSpec{Script: writeReleaseScript, Keys: m.keys, Channel: m.channel, EntryTTL: to, Args: pref, Fence: true}
	m.rrelease = core.ReleaseSpec{Script: readReleaseScript, Keys: m.keys, Channel: m.channel, EntryTTL: to, Args: pref, Fence: true}
	m.force = core.ForceSpec{Script: forceScript, Keys: m.keys, Channel: m.channel, EntryTTL: to, Args: pref, Fence: true}
	return m
}

// Name returns the name the lock was created with.
func (m *RWMutex) Name() string { return m.h.Name }

// RLocker returns a sync.Locker whose Lock and Unlock are m's RLock and
// RUnlock, as sync.RWMutex's does.
func (m *RWMutex) RLocker() sync.Locker { return rlocker{m} }

type rlocker struct{ m *RWMutex }

func (r rlocker) Lock()   { r.m.RLock() }
func (r rlocker) Unlock() { r.m.RUnlock() }
