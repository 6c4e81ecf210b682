package dsyncgocron

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/mutex"
)

// ErrHeld is returned by Locker.Lock when another scheduler runs the job:
// gocron then skips this run.
var ErrHeld = errors.New("dsyncgocron: the job is running elsewhere")

// A LockerOption configures a Locker.
type LockerOption func(*Locker)

// WithMutexOptions sets the options of the mutex of every job: its lease
// above all (mutex.WithWatchdog, mutex.WithLease), and its key prefix.
// The default is the mutex's, a 30s watchdog lease: a scheduler killed
// while running a job keeps it from running anywhere for up to 30s. For
// a job that runs every few seconds or faster, choose a watchdog lease of
// a few times the renewal round trip and well under the interval you can
// afford to miss, such as mutex.WithWatchdog(2*time.Second).
func WithMutexOptions(opts ...mutex.Option) LockerOption {
	return func(l *Locker) { l.opts = append(l.opts, opts...) }
}

// WithMinHold keeps a job's mutex at least d after it was taken, however
// soon the job returns, so that a scheduler whose tick comes up to d late
// does not run the same tick again after a short job. Choose d below the
// job's interval, with room for the release's round trip, or the next
// tick finds the mutex still held and is skipped: 80% of the interval
// tolerates schedulers 80ms apart on a 100ms job. The default is 0. Unlock
// waits out the rest of d before it releases, so gocron counts the run as
// lasting that long.
func WithMinHold(d time.Duration) LockerOption {
	return func(l *Locker) { l.minHold = max(d, 0) }
}

// A Locker is a gocron.Locker on dsync's mutex: each job name is a
// mutex, which a scheduler must hold to run the job. Lock makes one
// attempt (TryLockContext): when another scheduler holds the mutex, it
// returns ErrHeld and gocron skips the run. Every hold is a fresh owner,
// kept by the Lock value that Lock returns, so that gocron's Unlock,
// which passes the job's context rather than an owner, releases exactly
// that hold.
//
// The Locker keeps one mutex handle per job name for its life: make one
// Locker per scheduler (or per process) and keep it.
type Locker struct {
	b       backend.Backend
	opts    []mutex.Option
	minHold time.Duration

	mu      sync.Mutex
	mutexes map[string]*mutex.Mutex
	holding map[string]*Lock // the hold of each job running here
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker whose mutexes are on b.
func NewLocker(b backend.Backend, opts ...LockerOption) *Locker {
	l := &Locker{b: b, mutexes: map[string]*mutex.Mutex{}, holding: map[string]*Lock{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// mutex returns the handle on key's mutex, made on first use.
func (l *Locker) mutex(key string) *mutex.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.mutexes[key]
	if m == nil {
		m = mutex.New(l.b, key, l.opts...)
		l.mutexes[key] = m
	}
	return m
}

// Lock takes the mutex of the job called key, for a fresh owner, in one
// attempt bounded by ctx. It returns an error matching ErrHeld when
// another scheduler holds it, or the mutex's error: bad arguments
// (dsync.ErrInvalidName for an empty key, ...), dsync.ErrClosed,
// dsync.ErrUnexpectedReply, a backend error, ctx's error. Either way
// gocron skips the run.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	m := l.mutex(key)
	oc := dsync.WithOwner(ctx)
	ok, err := m.TryLockContext(oc)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("%w: %q", ErrHeld, key)
	}
	h := &Lock{l: l, m: m, key: key, owner: context.WithoutCancel(oc), taken: time.Now()}
	l.mu.Lock()
	l.holding[key] = h
	l.mu.Unlock()
	return h, nil
}

// Token returns the fencing token of the hold under which the job called
// key runs in this process, for the job to pass with its writes (see
// package mutex). It returns an error matching dsync.ErrNotHeld when the
// job does not run here, or its hold was lost. No two runs of a job hold
// its mutex at once, so a job's run may call it from its own goroutine.
func (l *Locker) Token(key string) (int64, error) {
	l.mu.Lock()
	h := l.holding[key]
	l.mu.Unlock()
	if h == nil {
		return 0, fmt.Errorf("dsyncgocron: job %q: %w", key, dsync.ErrNotHeld)
	}
	return h.m.Token(h.owner)
}

// A Lock is a job's hold, as Locker.Lock took it.
type Lock struct {
	l     *Locker
	m     *mutex.Mutex
	key   string
	owner context.Context // carries the hold's owner; never cancelled
	taken time.Time

	once sync.Once
	err  error
}

var _ gocron.Lock = (*Lock)(nil)

// Unlock releases the hold, after the Locker's minimum hold if the job
// was quicker (WithMinHold). The release does not depend on ctx, which
// gocron passes as the job's context (it may have ended at shutdown): it
// is bounded by the mutex's own few seconds. It returns the release's
// error: one matching dsync.ErrNotHeld if the hold was lost while the job
// ran. Calls after the first return the first's result.
func (h *Lock) Unlock(ctx context.Context) error {
	h.once.Do(func() {
		if wait := h.l.minHold - time.Since(h.taken); wait > 0 {
			time.Sleep(wait)
		}
		h.l.mu.Lock()
		if h.l.holding[h.key] == h {
			delete(h.l.holding, h.key)
		}
		h.l.mu.Unlock()
		h.err = h.m.UnlockContext(h.owner)
	})
	return h.err
}
