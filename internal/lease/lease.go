// Package lease keeps holds alive: the scheduler of a session (see package
// session) renews every watchdog lease of its backend in batched script
// calls, times out fixed leases, tells each holder when its hold is lost,
// and indexes the holds of the session by key.
//
// A watchdog lease of TTL d is renewed every d/3, counted from the last
// successful renewal (or the acquisition). Leases that fall due close
// together are renewed in the same call, so after a round or two the holds
// on a backend renew in cohorts: holding 10,000 locks costs a timer and a
// few dozen script calls per interval, not 10,000 goroutines or calls. On a
// sharded backend a call covers one hash slot, so the calls of a round are
// as many as the slots held; a sharded backend that implements
// backend.Batcher takes up to MaxBundle of them per EvalBatch, one
// pipeline per node (10,000 holds on 3 masters: about ten calls and thirty
// round trips per interval, against some 4,700 without it). A hold is
// lost when a renewal finds it gone, or when renewals have failed until the
// lease ran out; validity is measured on the local monotonic clock from the
// moment the acquiring (or renewing) call was sent, and the client gives
// up a margin before that (Spec.Margin), so that it gives up before the
// server expires the key even when its timer fires a little late or the
// server's clock runs a little fast.
//
// While a scheduler keeps leases it watches its session's pub/sub
// connection (Hooks.Watch): when that connection breaks and is made again,
// the server may have restarted without its data, so every lease is
// renewed (a fixed one checked) at once, with quick retries for the pooled
// connections the same break left dead.
//
// The files: lease.go is a hold's lease and its deadline; scheduler.go
// the queue, the timer and the ends of leases; renew.go the one path by
// which renewals are grouped, sent and applied; index.go the index by key
// and the holds taken before their lease started.
package lease

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
)

const (
	// MaxBatch bounds the leases renewed by one script call.
	MaxBatch = 500

	// MaxBundle bounds the renewal calls sent in one EvalBatch, on a
	// sharded backend that implements backend.Batcher: on a cluster, each
	// is the batch of one hash slot, and the pipeline costs one round
	// trip per node.
	MaxBundle = 1000

	// MaxRenewing bounds the renewal calls in flight per backend, and so
	// the goroutines renewals use, however many locks are held: one each,
	// besides the timer's callback and the one handing out the batches.
	MaxRenewing = 4

	// IdleRetire is how soon a scheduler left without leases tells its
	// session it is idle.
	IdleRetire = time.Second
)

// Spec describes a hold to keep. Keys and Extra are shared, not copied:
// a primitive passes the same slices for every hold of a handle.
type Spec struct {
	Key     string // the primitive's main key; with Owner and Role, indexes the hold
	Owner   string
	Role    string // what the owner holds: "x" exclusive, "r" read, ...
	ID      string // the hold's id on the server, unique across servers
	Name    string // for log messages
	Channel string // the primitive's wake-up channel, for waiters queued behind the hold
	TTL     time.Duration

	// Token is the hold's fencing token, or 0 if it was not drawn yet (a
	// plain hold, see codec.lua): the first call that needs it draws it
	// (see Lease.SetToken).
	Token int64

	// OwnerArg and IDArg, if not nil, are Owner and ID as script
	// arguments, made once for the acquisition, and PlainArg the hold's
	// plain value (see codec.PlainValue): renewals and releases pass them
	// without making them again.
	OwnerArg, IDArg, PlainArg any

	// Initial, if positive and shorter than TTL, is the hold's expiry on
	// the server when acquired: a hold handed to a waiter starts on a
	// short lease, so that a waiter that died frees it soon, and the
	// first renewal extends it to TTL. Only watchdog leases may have one.
	Initial time.Duration

	// Renew is the primitive's batched renewal script. The script
	// receives the Keys of every lease in the batch, one lease after
	// another, and ARGV = the number of keys per lease, the number of
	// args per lease, then per lease its owner, its lease in ms (0 for a
	// fixed lease, which the script then only checks), its hold id and
	// Extra. It replies with one integer per lease: 1 renewed, 0 gone.
	Renew *backend.Script
	Keys  []string
	Extra []any

	// Fixed makes a lease that is never renewed: it simply expires. Renew
	// is then run, with a lease of 0 ms, only to check that the hold is
	// still there after the connection to the server was broken and made
	// again (see Scheduler.check).
	Fixed bool

	// Margin is how long before the hold's expiry on the server the
	// client gives it up (Done closes): the server's clock may run
	// ahead, and the timer that reports the end may fire late. Negative
	// means DefaultMargin; it is capped at half the lease.
	Margin time.Duration

	Logger *slog.Logger // may be nil

	// Ended, if set, is told when the lease ends: whether it was lost,
	// and why. It is called with the scheduler's lock held: it must be
	// quick.
	Ended func(lost bool, reason string)
}

// DefaultMargin is the margin of a lease of ttl unless given another:
// 1% of it for clock drift, as the RedLock algorithm counts, plus 2ms for
// the granularity of the server's expiry and the scheduling of the timer.
func DefaultMargin(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// margin returns the margin of a lease of ttl.
func (l *Lease) margin(ttl time.Duration) time.Duration {
	m := l.spec.Margin
	if m < 0 {
		m = DefaultMargin(ttl)
	}
	return min(m, ttl/2)
}

// until returns until when a hold that had ttl left after a call sent at
// t is known valid: its expiry, less the margin.
func (l *Lease) until(t time.Time, ttl time.Duration) time.Time {
	return t.Add(ttl - l.margin(ttl))
}

type state uint8

const (
	active state = iota
	lost
	released
	// pending is a hold handed to a waiter of the session that has not
	// kept it yet (see Scheduler.Pending): indexed, so that the session's
	// other waiters may queue behind it, but not kept alive.
	pending
)

// Lease is a hold being kept alive.
type Lease struct {
	spec  Spec
	s     *Scheduler
	token atomic.Int64 // spec.Token, or the one drawn since (see SetToken)
	began time.Time    // when the session learned it holds (see Began)

	// Guarded by s.mu.
	done      chan struct{} // made by the first Done, closed at the end
	nextKey   *Lease        // the next lease of the same key in the index
	deadline  time.Time     // lost when passed without a renewal
	next      time.Time     // when the scheduler next looks at it
	index     int           // in s.queue, or -1
	held      int64         // what the session acquired and did not release (see Keep, Settle)
	rechecks  int           // checks failed since a reconnection
	releasing int           // releases under way
	state     state
	retrying  bool // the last renewal failed: next is a retry, not a due time
	checking  bool // due for a check after a reconnection (see Scheduler.check)
	gone      bool // a renewal found it gone while a release was under way
	expired   bool // lost at its deadline, so perhaps still on the server for the margin (see Releasable)
	indexed   bool

	onEnd     []*EndHook  // see OnEnd; guarded by s.mu
	firstHook [1]*EndHook // onEnd's room for the first
	reason    string      // why it was lost (see Reason); guarded by s.mu

	// Waiters of the session queued behind the hold (see Enqueue),
	// guarded by s.mu.
	queued   []string
	closed   bool          // a release is under way: queue no more
	inflight chan struct{} // closed when the release attempt carrying the taken entries ended
}

// Done returns a channel closed when the hold ends: lost, or released by
// its final unlock.
func (l *Lease) Done() <-chan struct{} {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.done == nil {
		if l.state != active {
			return closedChan
		}
		l.done = make(chan struct{})
	}
	return l.done
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Token returns the hold's fencing token, or 0 if it was not drawn yet.
func (l *Lease) Token() int64 { return l.token.Load() }

// SetToken records the fencing token drawn for the hold since it was
// kept, unless it has one.
func (l *Lease) SetToken(token int64) { l.token.CompareAndSwap(0, token) }

// Args returns the hold's owner, id and plain value as script arguments.
func (l *Lease) Args() (owner, id, plain any) {
	owner, id, plain = l.spec.OwnerArg, l.spec.IDArg, l.spec.PlainArg
	if owner == nil {
		owner = l.spec.Owner
	}
	if id == nil {
		id = l.spec.ID
	}
	if plain == nil {
		plain = codec.PlainValue(l.spec.Owner, l.spec.ID, l.spec.Role)
	}
	return owner, id, plain
}

// Renewed reports whether the watchdog renews the lease (it is not
// fixed).
func (l *Lease) Renewed() bool { return !l.spec.Fixed }

// TTL returns the lease the hold is renewed to, or its fixed lease.
func (l *Lease) TTL() time.Duration { return l.spec.TTL }

// Began returns when the session learned that it holds: the reply or the
// wake-up that told it, not a re-entry's.
func (l *Lease) Began() time.Time { return l.began }

// ID returns the hold's id on the server.
func (l *Lease) ID() string { return l.spec.ID }

// Owner returns the owner id of the hold.
func (l *Lease) Owner() string { return l.spec.Owner }

// Role returns what the owner holds (see Spec.Role).
func (l *Lease) Role() string { return l.spec.Role }

// Key returns the main key of the hold's primitive.
func (l *Lease) Key() string { return l.spec.Key }

// Lost reports whether the hold was lost rather than released or still
// held.
func (l *Lease) Lost() bool {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.state == lost
}

// Ended reports whether the lease ended, lost or released.
func (l *Lease) Ended() bool {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.state != active
}

// Deadline returns the time until which the hold is known valid: its
// expiry on the server, as far as the client can tell, less the margin.
func (l *Lease) Deadline() time.Time {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.deadline
}

// renewedLocked records a successful acquisition, renewal or re-entry sent
// at t, after which the hold had ttl left on the server. No script
// shortens a hold's expiry, so each such reply bounds the expiry from
// below for the rest of the hold: the deadline only moves forward, and
// never past what the server keeps.
func (l *Lease) renewedLocked(t time.Time, ttl time.Duration) {
	l.retrying = false
	if d := l.until(t, ttl); l.deadline.IsZero() || d.After(l.deadline) {
		l.deadline = d
	}
	if l.spec.Fixed {
		l.next = l.deadline
		return
	}
	// A third of this reply's lease on, or, when an earlier reply left
	// the hold longer (a re-entry through a handle with a longer lease),
	// when a third of the watchdog's lease is all that is left of it:
	// never in the past, which would renew in a loop.
	l.next = t.Add(ttl / 3)
	if late := l.deadline.Add(-2 * l.spec.TTL / 3); late.After(l.next) {
		l.next = late
	}
}

// serverExpiryLocked returns when the server expires the hold, as far as
// the client can tell: its deadline plus the margin.
func (l *Lease) serverExpiryLocked() time.Time {
	return l.deadline.Add(l.margin(l.spec.TTL))
}

// Releasable reports whether a release of l may still find its hold on
// the server: it has not ended, or it expired (see expireLocked) less
// than the margin ago.
func (l *Lease) Releasable() bool {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.releasableLocked()
}

func (l *Lease) releasableLocked() bool {
	return l.state == active || l.expired && time.Now().Before(l.serverExpiryLocked())
}

// Enqueue queues the waiter entry behind the hold, to be registered on the
// server by the hold's next release (see package mutex), and reports
// whether it did: not once the hold ended or a release of it is under
// way. It returns the hold's token too, read with the queue: a pending
// hold's record changes when its waiter keeps it.
func (l *Lease) Enqueue(entry string) (token int64, ok bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if (l.state != active && l.state != pending) || l.closed {
		return 0, false
	}
	l.queued = append(l.queued, entry)
	return l.token.Load(), true
}

// Dequeue takes entry out of the queue behind the hold. If a release took
// it already, it returns a channel closed when that release's attempt has
// ended: the entry may be registered on the server only then.
func (l *Lease) Dequeue(entry string) <-chan struct{} {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	for i, e := range l.queued {
		if e == entry {
			l.queued = append(l.queued[:i], l.queued[i+1:]...)
			return nil
		}
	}
	return l.inflight
}

// takeQueuedLocked returns the entries queued behind the hold, in order,
// for the first attempt of a release, and closes the queue until Reopen
// (see Begin.TakeQueued). It returns ok false if another release of the
// hold is under way. When it returns entries, the release must call
// Carried after its first attempt.
func (l *Lease) takeQueuedLocked() (entries []string, ok bool) {
	if l.closed {
		return nil, false
	}
	l.closed = true
	entries, l.queued = l.queued, nil
	if len(entries) > 0 {
		l.inflight = make(chan struct{})
	}
	return entries, true
}

// Carried tells the waiters whose entries a release took that the attempt
// carrying them has ended.
func (l *Lease) Carried() {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.inflight != nil {
		close(l.inflight)
		l.inflight = nil
	}
}

// Reopen lets waiters queue behind the hold again after a release that
// left it held.
func (l *Lease) Reopen() {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.inflight != nil {
		close(l.inflight)
		l.inflight = nil
	}
	l.closed = false
}
