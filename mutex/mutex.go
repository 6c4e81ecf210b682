package mutex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/internal/options"
)

const (
	// waiterTTL is how long a waiter's registration outlives its last
	// attempt; heartbeat, the longest a waiter sleeps between attempts,
	// keeps a live waiter's entry fresh. A waiter that died may be handed
	// the mutex until its entry expires; each time, that costs the others
	// the hand-off lease, noticed within a heartbeat.
	waiterTTL = 15 * time.Second
	heartbeat = 5 * time.Second

	// handoffLease bounds the first lease of a hold that a release hands
	// to a waiter while the watchdog is on (see handedLease): a waiter
	// that died since its last attempt holds the mutex up for at most
	// this. A live waiter takes the hold without another round trip if
	// it was handed over within half of it of the waiter's last attempt.
	handoffLease = 2 * time.Second

	// FenceTTL is how long a mutex keeps its last fencing token on the
	// server after the last acquisition. Tokens keep increasing after it
	// expires (see the package documentation); the kept token only guards
	// against the server clock stepping back meanwhile.
	FenceTTL = time.Hour
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
	b    backend.Backend
	name string
	cfg  options.Common
	err  error // invalid arguments, reported by every call

	key, waiters, fence, channel string

	mu   sync.Mutex
	anon string // owner of the ownerless hold taken through this handle
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
	m := &Mutex{b: b, name: name, cfg: cfg, err: cfg.Err}
	if err := options.CheckBackend(b); err != nil {
		m.err = err
	}
	base, err := keys.Base(cfg.Prefix, "mutex", name)
	if m.err == nil && err != nil {
		m.err = err
	}
	m.key = base
	m.waiters = base + ":waiters"
	m.fence = base + ":fence"
	m.channel = base + ":wake"
	if m.err != nil {
		m.err = fmt.Errorf("mutex %q: %w", truncate(name), m.err)
	}
	return m
}

// Name returns the name the mutex was created with.
func (m *Mutex) Name() string { return m.name }

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func (m *Mutex) check(ctx context.Context) error {
	if m.key == "" && m.err == nil {
		return fmt.Errorf("%w: zero Mutex; use mutex.New", dsync.ErrInvalidBackend)
	}
	if m.err != nil {
		return m.err
	}
	return ctx.Err()
}

// wrap names the operation and the mutex in err, once.
func (m *Mutex) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mutex %q: %s: %w", truncate(m.name), op, err)
}

// lockOwner returns the owner an acquisition with ctx is made for: ctx's
// owner, or a fresh one for an ownerless hold.
func lockOwner(ctx context.Context) (owner string, anon bool) {
	if id, ok := dsync.OwnerFrom(ctx); ok {
		return id, false
	}
	return dsync.NewID(), true
}

// holder returns the owner that a release or query with ctx refers to:
// ctx's owner, or the ownerless hold of this handle ("" if none).
func (m *Mutex) holder(ctx context.Context) (owner string, anon bool) {
	if id, ok := dsync.OwnerFrom(ctx); ok {
		return id, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.anon, true
}

func (m *Mutex) setAnon(owner string) {
	m.mu.Lock()
	m.anon = owner
	m.mu.Unlock()
}

// clearAnon forgets the ownerless hold if it is still owner's: another
// goroutine may already have taken a new one through this handle.
func (m *Mutex) clearAnon(owner string) {
	m.mu.Lock()
	if m.anon == owner {
		m.anon = ""
	}
	m.mu.Unlock()
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

var errLost = errors.New("the hold was lost")
