package semaphore

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/options"
	"github.com/dsyncgo/dsync/internal/script"
	"github.com/dsyncgo/dsync/observe"
)

const (
	// DefaultWaiterTimeout is how long a waiter's place in the queue
	// outlives its last heartbeat unless WithWaiterTimeout says otherwise.
	DefaultWaiterTimeout = 5 * time.Second

	// role is the lease role of an owner's permits.
	role = "p"
)

// ErrCapacityMismatch reports an acquisition through a handle whose
// capacity differs from the capacity of the semaphore's state on the
// server, when none was set at runtime (see SetCapacity): two processes
// configured with different capacities for the same name.
var ErrCapacityMismatch = errors.New("dsync/semaphore: capacity differs from the semaphore's on the server")

// An Option configures a Semaphore.
type Option struct{ apply func(*options.Common) }

// WithLease makes every owner's permits expire d after its last
// acquisition, with no renewal. A holder that needs longer must finish or
// lose its permits; Done reports the expiry. d must be at least 1ms.
func WithLease(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetLease(d) }}
}

// WithWatchdog sets the lease that the watchdog renews while permits are
// held, every d/3. The default is 30s, so the permits of a holder that
// crashes come back within 30s. d must be at least 1ms.
func WithWatchdog(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetWatchdog(d) }}
}

// WithExpiryMargin sets how long before a hold's expiry on the server its
// holder gives its permits up (Done closes); see the mutex package's option of the
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

// WithWaiterTimeout sets how long a waiter's place in the queue outlives
// its last heartbeat; waiters beat every third of it, so a live waiter
// keeps its place however long it waits, and one whose process died is
// skipped at most d after its last beat. The default is
// DefaultWaiterTimeout, 5s. d must be at least 10ms.
func WithWaiterTimeout(d time.Duration) Option {
	return Option{func(c *options.Common) { c.SetWaiterTimeout(d) }}
}

// WithPrefix sets the first part of every key and channel name; the
// default is "dsync". It must not be empty or contain braces.
func WithPrefix(p string) Option {
	return Option{func(c *options.Common) { c.Prefix = p }}
}

// WithLogger sets where background events are logged: permits lost
// (Warn), a server that cannot be reached while waiting (Warn), lease
// renewals retried (Debug). The default is slog.Default(); nil discards
// them.
func WithLogger(l *slog.Logger) Option {
	return Option{func(c *options.Common) { c.SetLogger(l) }}
}

// A Semaphore is a counting semaphore shared through a Redis-compatible
// server. Create one with New; the zero value is not usable. A Semaphore
// is safe for concurrent use, and any number of Semaphore values, in any
// number of processes, may refer to the same name.
type Semaphore struct {
	h        core.Handle
	capacity int64
	err      error // an invalid capacity, reported by every call

	holders, channel string
	keys             []string // of every script but renew (see lua/state.lua)
	hold             core.HoldSpec
	releases         core.ReleaseSpec
	capArg           any // the capacity, as a script argument made once

	// specs holds the acquisition specs of requests for 1 to len(specs)
	// permits, each made on first use (see spec).
	specs [16]atomic.Pointer[core.LockSpec]

	mu   sync.Mutex
	anon []*anonHold // ownerless holds taken through this handle, oldest first
}

// anonHold is the hold of an ownerless acquisition: a fresh owner, known
// to this handle only, so that its count of permits is kept here too.
type anonHold struct {
	owner   string
	l       *lease.Lease
	permits int64 // guarded by Semaphore.mu: not yet given back
}

// MaxCapacity is the largest capacity: the greatest integer that the
// server's Lua counts exactly (2^53 - 1).
const MaxCapacity = script.MaxExact

// New returns a handle on the semaphore called name on b, with capacity
// permits. It does no I/O. Bad arguments (a nil backend, an empty name or
// one over 1 KiB, a capacity under 1 or over MaxCapacity, a lease under
// 1ms, a bad prefix) are reported, matching dsync.ErrInvalidBackend,
// ErrInvalidName, ErrInvalidPermits or ErrInvalidLease, by every call on
// the handle.
func New(b backend.Backend, name string, capacity int64, opts ...Option) *Semaphore {
	cfg := options.Defaults()
	cfg.WaiterTimeout = DefaultWaiterTimeout
	for _, o := range opts {
		o.apply(&cfg)
	}
	s := &Semaphore{capacity: capacity}
	s.h.Init(b, "semaphore", name, cfg)
	if (capacity < 1 || capacity > MaxCapacity) && s.h.Check() == nil {
		s.err = fmt.Errorf("semaphore %q: %w: capacity %d", name, dsync.ErrInvalidPermits, capacity)
	}
	s.holders = s.h.Companion("holders")
	s.keys = []string{s.h.Key, s.holders, s.h.Companion("queue"), s.h.Companion("expiry"), s.h.Companion("capacity")}
	s.channel = s.h.Companion("wake")
	s.capArg = capacity
	s.hold = s.holdSpec()
	s.releases = core.ReleaseSpec{Script: releaseScript, Keys: s.keys, Channel: s.channel, EntryTTL: cfg.WaiterTimeout,
		Units: true, PlainFields: []int64{capacity}, Args: []any{s.capArg}}
	return s
}

// Name returns the name the semaphore was created with.
func (s *Semaphore) Name() string { return s.h.Name }

// check reports an unusable handle, then a permit count n outside
// 1..capacity, before any I/O.
func (s *Semaphore) check(op string, n int64) error {
	if err := s.h.Check(); err != nil {
		return err
	}
	if s.err != nil {
		return s.err
	}
	if n < 1 || n > s.capacity {
		return s.h.Wrap(op, fmt.Errorf("%w: %d (the capacity is %d)", dsync.ErrInvalidPermits, n, s.capacity))
	}
	return nil
}

// valid is check without a permit count.
func (s *Semaphore) valid() error {
	if err := s.h.Check(); err != nil {
		return err
	}
	return s.err
}

// scriptError makes the semaphore's own error replies match their
// sentinels; the server error stays wrapped, so that the wait loop treats
// them as permanent.
func scriptError(err error) error {
	var se *backend.ServerError
	if errors.As(err, &se) {
		switch {
		case strings.Contains(se.Message, "DSYNC invalid permits"):
			return fmt.Errorf("%w: %w", dsync.ErrInvalidPermits, err)
		case strings.Contains(se.Message, "DSYNC capacity mismatch"):
			return fmt.Errorf("%w: %w", ErrCapacityMismatch, err)
		}
	}
	return err
}

func (s *Semaphore) holdSpec() core.HoldSpec {
	return core.HoldSpec{Role: role, Channel: s.channel, Renew: renewScript, Keys: []string{s.h.Key, s.holders}}
}
