package multilock

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync"
)

// DefaultDriftFactor is RedLock's clock drift allowance, as a fraction of
// the lease, unless WithDriftFactor gives another.
const DefaultDriftFactor = 0.01

// DefaultLease is the lease RedLock counts validity against unless
// WithLease gives another: the members' default watchdog lease.
const DefaultLease = 30 * time.Second

// An Option configures a RedLock.
type Option func(*Lock)

// WithDriftFactor sets the clock drift RedLock allows for, as a fraction
// of the lease: the validity of an acquisition is the lease less the time
// it took less lease×f + 2ms. f must be in [0, 0.5); the default is 0.01.
func WithDriftFactor(f float64) Option {
	return func(l *Lock) {
		if f < 0 || f >= 0.5 || f != f {
			l.fail(fmt.Errorf("%w: drift factor %v (it must be in [0, 0.5))", dsync.ErrInvalidLease, f))
			return
		}
		l.drift = f
	}
}

// WithLease says what lease RedLock's members hold their locks with (their
// WithLease or WithWatchdog), against which the validity of an acquisition
// is counted. The default is 30s, the members' default. d must be at least
// 1ms.
func WithLease(d time.Duration) Option {
	return func(l *Lock) {
		if d < time.Millisecond {
			l.fail(fmt.Errorf("%w: %v (the minimum is 1ms)", dsync.ErrInvalidLease, d))
			return
		}
		l.lease = d
	}
}

// A Lock is a multi-lock: All or RedLock over its members. Its zero value
// is not usable; it is safe for concurrent use.
type Lock struct {
	members []dsync.Locker
	order   []int // member indices in canonical order
	quorum  int   // members a hold needs
	redlock bool
	// contended says a RedLock round of this lock last found a member
	// busy: an acquisition by an owner that holds none of the members
	// then queues for the first member before it tries the others (see
	// gateFirst).
	contended atomic.Bool
	// gateReached says the gate's server answered this lock's last
	// attempt on it (see gateFirst): the next queues for it at once.
	gateReached atomic.Bool
	drift       float64
	lease       time.Duration
	err         error

	mu    sync.Mutex
	holds map[string][]*hold // by owner, the newest last
	// anon are the owners of ownerless holds, oldest first: contexts
	// carrying nothing but the owner, kept to unlock with.
	anon []context.Context
}

var (
	_ dsync.Locker = (*Lock)(nil)
	_ sync.Locker  = (*Lock)(nil)
)

// All returns a lock that holds every one of locks, or none.
func All(locks ...dsync.Locker) *Lock {
	l := newLock(locks)
	l.quorum = len(locks)
	return l
}

// RedLock returns a lock that holds a majority (N/2+1) of locks, which
// must be on independent servers, with the default drift factor and lease.
func RedLock(locks ...dsync.Locker) *Lock { return NewRedLock(locks) }

// NewRedLock is RedLock with options.
func NewRedLock(locks []dsync.Locker, opts ...Option) *Lock {
	l := newLock(locks)
	l.redlock = true
	l.quorum = len(locks)/2 + 1
	for _, o := range opts {
		o(l)
	}
	return l
}

func newLock(locks []dsync.Locker) *Lock {
	l := &Lock{members: slices.Clone(locks), drift: DefaultDriftFactor, lease: DefaultLease, holds: map[string][]*hold{}}
	if len(locks) == 0 {
		l.fail(fmt.Errorf("%w: no locks", dsync.ErrInvalidMembers))
	}
	keys := make([]string, len(locks))
	for i, m := range locks {
		if m == nil || isNilPointer(m) {
			l.fail(fmt.Errorf("%w: lock %d is nil", dsync.ErrInvalidMembers, i))
			continue
		}
		for j := range i {
			if sameLock(locks[j], m) {
				l.fail(fmt.Errorf("%w: locks %d and %d are the same", dsync.ErrInvalidMembers, j, i))
			}
		}
		keys[i] = canonicalKey(m, i)
	}
	l.order = make([]int, len(locks))
	for i := range l.order {
		l.order[i] = i
	}
	slices.SortStableFunc(l.order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	return l
}

func (l *Lock) fail(err error) {
	if l.err == nil {
		l.err = fmt.Errorf("multilock: %w", err)
	}
}

func isNilPointer(m dsync.Locker) bool {
	v := reflect.ValueOf(m)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.Slice:
		return v.IsNil()
	}
	return false
}

func sameLock(a, b dsync.Locker) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) || !reflect.TypeOf(a).Comparable() {
		return false
	}
	return a == b
}

// canonicalKey orders members the same way in every multi-lock and
// process: by type and name, for members that have a name.
func canonicalKey(m dsync.Locker, i int) string {
	if n, ok := m.(interface{ Name() string }); ok {
		return fmt.Sprintf("%T\x00%s", m, n.Name())
	}
	return fmt.Sprintf("%T\x00\xff%08d", m, i)
}
