package conformance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
)

// exclusiveLock is what the exclusive table needs of a primitive: the
// method set that mutex.Mutex and fairlock.Mutex share.
type exclusiveLock interface {
	dsync.Locker
	sync.Locker
	Token(ctx context.Context) (int64, error)
	Done(ctx context.Context) <-chan struct{}
	IsLocked(ctx context.Context) (bool, error)
	HoldCount(ctx context.Context) (int, error)
	TTL(ctx context.Context) (time.Duration, error)
	ForceUnlock(ctx context.Context) (bool, error)
}

// lockConfig holds the options a test gives a lock; zero fields keep the
// primitive's defaults.
type lockConfig struct {
	prefix   string
	watchdog time.Duration // a watchdog lease
	fixed    time.Duration // a fixed lease
	setFixed bool          // pass fixed even if zero
	// waiterTimeout, if not zero, is the waiter timeout of the kinds that
	// take one (the mutex's is fixed at 15s).
	waiterTimeout time.Duration
}

// lockKind is an exclusive primitive the table runs against.
type lockKind struct {
	kind    string // its key kind, as in keys.Base
	waiters string // the companion key whose cardinality counts its waiters
	new     func(b backend.Backend, name string, c lockConfig) exclusiveLock
	zero    func() exclusiveLock
}

var (
	mutexKind = lockKind{
		kind:    "mutex",
		waiters: "queue",
		new: func(b backend.Backend, name string, c lockConfig) exclusiveLock {
			var opts []mutex.Option
			if c.prefix != "" {
				opts = append(opts, mutex.WithPrefix(c.prefix))
			}
			if c.watchdog != 0 {
				opts = append(opts, mutex.WithWatchdog(c.watchdog))
			}
			if c.fixed != 0 || c.setFixed {
				opts = append(opts, mutex.WithLease(c.fixed))
			}
			return mutex.New(b, name, opts...)
		},
		zero: func() exclusiveLock { return new(mutex.Mutex) },
	}
	fairlockKind = lockKind{
		kind:    "fairlock",
		waiters: "queue",
		new: func(b backend.Backend, name string, c lockConfig) exclusiveLock {
			var opts []fairlock.Option
			if c.prefix != "" {
				opts = append(opts, fairlock.WithPrefix(c.prefix))
			}
			if c.watchdog != 0 {
				opts = append(opts, fairlock.WithWatchdog(c.watchdog))
			}
			if c.fixed != 0 || c.setFixed {
				opts = append(opts, fairlock.WithLease(c.fixed))
			}
			if c.waiterTimeout != 0 {
				opts = append(opts, fairlock.WithWaiterTimeout(c.waiterTimeout))
			}
			return fairlock.New(b, name, opts...)
		},
		zero: func() exclusiveLock { return new(fairlock.Mutex) },
	}
	rwlockWriteKind = lockKind{
		kind:    "rwlock",
		waiters: "wqueue",
		new: func(b backend.Backend, name string, c lockConfig) exclusiveLock {
			return writeSide{newRWLock(b, name, c)}
		},
		zero: func() exclusiveLock { return writeSide{new(rwlock.RWMutex)} },
	}
)

func newRWLock(b backend.Backend, name string, c lockConfig, more ...rwlock.Option) *rwlock.RWMutex {
	var opts []rwlock.Option
	if c.prefix != "" {
		opts = append(opts, rwlock.WithPrefix(c.prefix))
	}
	if c.watchdog != 0 {
		opts = append(opts, rwlock.WithWatchdog(c.watchdog))
	}
	if c.fixed != 0 || c.setFixed {
		opts = append(opts, rwlock.WithLease(c.fixed))
	}
	if c.waiterTimeout != 0 {
		opts = append(opts, rwlock.WithWaiterTimeout(c.waiterTimeout))
	}
	return rwlock.New(b, name, append(opts, more...)...)
}

// writeSide is the write side of a read-write lock, with the queries of
// the exclusive table read off its State.
type writeSide struct{ *rwlock.RWMutex }

func (w writeSide) IsLocked(ctx context.Context) (bool, error) {
	s, err := w.State(ctx)
	return s.Mode == rwlock.Write, err
}

func (w writeSide) HoldCount(ctx context.Context) (int, error) {
	s, err := w.State(ctx)
	return s.WriteCount, err
}

func (w writeSide) TTL(ctx context.Context) (time.Duration, error) {
	s, err := w.State(ctx)
	return s.TTL, err
}

func (k lockKind) open(b backend.Backend, name string, c lockConfig) exclusiveLock {
	return k.new(b, name, c)
}

// key returns the main key of the lock name under prefix p.
func (k lockKind) key(p, name string) string {
	key, err := keys.Base(p, k.kind, name)
	if err != nil {
		panic(err)
	}
	return key
}

// awaitQueued waits until n waiters of the lock name under p are
// registered on the server: each has subscribed and registered with the
// attempt it made just before going to sleep, so from then on only a
// wake-up, its heartbeat or the holder's lease ends its sleep.
func (k lockKind) awaitQueued(t *testing.T, ctx context.Context, b backend.Backend, p, name string, n int) {
	t.Helper()
	key := k.key(p, name) + ":" + k.waiters
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		v, err := b.Eval(ctx, zcardScript, []string{key})
		must(t, err, "ZCARD")
		if got, _ := backend.Int(v); got >= int64(n) {
			return
		}
		if time.Now().After(deadline) || i > 5000 {
			t.Fatalf("%d waiters not queued within 5s", n)
		}
		time.Sleep(time.Millisecond)
	}
}
