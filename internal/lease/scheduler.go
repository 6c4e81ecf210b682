package lease

import (
	"container/heap"
	"sync"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// Hooks connect a scheduler to the rest of its session.
type Hooks struct {
	// Watch starts watching the session's pub/sub connection, calling
	// check (Scheduler.Check) after every reconnection, until the
	// returned stop is called. The scheduler watches while it keeps
	// leases.
	Watch func(check func()) (stop func())

	// Idle is called, without any lock held, once the scheduler has kept
	// no lease for IdleRetire: the session may retire.
	Idle func()

	// Wake wakes the waiters of the session queued behind a hold that
	// ended without a release taking them (see Lease.Enqueue).
	Wake func(channel string, entries []string)
}

// Scheduler renews the leases of one session's backend.
//
// It owns no goroutine: a timer fires when the earliest lease is due, and
// its callback runs the round. Taking and releasing locks therefore costs
// no goroutine start or thread wake-up, and an idle session costs nothing.
type Scheduler struct {
	b     backend.Backend
	hooks Hooks

	mu      countingMutex
	queue   leaseHeap
	count   int         // leases not yet ended
	timer   *time.Timer // runs tick
	armed   time.Time   // when timer fires; zero if stopped
	busy    bool        // a round is running; it re-arms the timer when done
	retired bool        // the session retired: Keep starts nothing
	unwatch func()      // ends the watch, while leases are kept

	byKey map[string]*Lease    // the index (see index.go)
	taken map[string]takenHold // holds taken before their lease started

	renewing chan struct{} // a token per renewal call in flight

	// checks counts the reconnections' checks (see Check): a renewal
	// call prepared before the latest may have run on the server before
	// it lost its data, and its leases, off the queue then, are checked
	// again when its reply comes in.
	checks uint64

	// Observed by tests and benchmarks.
	calls int64
}

// countingMutex is the scheduler's lock. Every lock and unlock of the
// session takes it, and under load its goroutines queue for it: it counts
// how often it was taken, for the tests that bound that.
type countingMutex struct {
	sync.Mutex
	taken uint64 // guarded by the mutex itself
}

func (m *countingMutex) Lock() {
	m.Mutex.Lock()
	m.taken++
}

// LockCount reports how many times the scheduler's lock has been taken,
// LockCount's own takings excluded.
func (s *Scheduler) LockCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.taken--
	return s.mu.taken
}

// NewScheduler returns the scheduler of a session on b.
func NewScheduler(b backend.Backend, hooks Hooks) *Scheduler {
	return &Scheduler{b: b, hooks: hooks, renewing: make(chan struct{}, MaxRenewing), byKey: make(map[string]*Lease)}
}

// Stats reports the leases being kept and the renewal calls made so far.
func (s *Scheduler) Stats() (leases int, calls int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, s.calls
}

// Keep records a successful acquisition of units (holds or permits) of
// spec's hold by a call sent at sent, after which the hold had ttl left on
// the server (0: spec.TTL, or spec.Initial): if the session keeps that
// very hold already (a re-entry), its lease is extended and returned, else
// a new lease starts, replacing any other lease of the same key, owner and
// role, which ends. A hold that ForceUnlock took before its lease started
// starts lost. Keep returns nil if the session retired meanwhile; the
// caller asks its session again.
func (s *Scheduler) Keep(spec Spec, sent time.Time, ttl time.Duration, units int64) *Lease {
	s.mu.Lock()
	if s.retired {
		s.mu.Unlock()
		return nil
	}
	p := s.byIDLocked(spec.Key, spec.Owner, spec.Role, spec.ID)
	if l := p; l != nil && l.state == active {
		l.held += units
		l.SetToken(spec.Token)
		if ttl > 0 && l.until(sent, ttl).After(l.deadline) {
			l.renewedLocked(sent, ttl)
			if l.index >= 0 {
				heap.Fix(&s.queue, l.index)
			}
			s.armLocked()
		}
		s.mu.Unlock()
		return l
	}
	l := &Lease{spec: spec, s: s, index: -1, held: units, began: time.Now()}
	l.token.Store(spec.Token)
	if old := s.findLocked(spec.Key, spec.Owner, spec.Role); old != nil {
		s.endLocked(old, released, "")
	}
	if p != nil && p.state == pending {
		// The hold handed to this waiter: its record becomes the lease,
		// with the waiters queued behind it.
		l = p
		l.spec, l.held, l.state, l.deadline, l.began = spec, units, active, time.Time{}, time.Now()
		l.token.Store(spec.Token)
	} else {
		s.indexLocked(l)
	}
	s.count++
	if ttl <= 0 || ttl > spec.TTL {
		ttl = spec.TTL
		if spec.Initial > 0 && spec.Initial < ttl && !spec.Fixed {
			ttl = spec.Initial
		}
	}
	l.renewedLocked(sent, ttl)
	heap.Push(&s.queue, l)
	if s.count == 1 && s.unwatch == nil && s.hooks.Watch != nil {
		s.unwatch = s.hooks.Watch(s.Check)
	}
	s.armLocked()
	if reason, ok := s.wasTakenLocked(spec.Key, spec.ID); ok {
		s.loseLocked(l, reason, nil)
	}
	s.mu.Unlock()
	return l
}

// Extend records that the hold was re-acquired, or released in part, by a
// call sent at sentAt, after which it had ttl left on the server.
func (l *Lease) Extend(sentAt time.Time, ttl time.Duration) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.state != active || !l.until(sentAt, ttl).After(l.deadline) {
		return
	}
	l.renewedLocked(sentAt, ttl)
	if l.index >= 0 {
		heap.Fix(&s.queue, l.index)
	}
	s.armLocked()
}

// Begin says what BeginRelease does besides recording the release.
type Begin struct {
	// Releasable makes BeginRelease record nothing and report false
	// unless the lease is releasable (see Releasable).
	Releasable bool
	// TakeQueued takes the entries queued behind the hold, in order,
	// into Begun, for the release's first attempt to register, and
	// closes the queue until Reopen. A release that takes entries must
	// call Carried after its first attempt.
	TakeQueued bool
}

// Begun is what a release learns of its lease as it begins, at one
// instant.
type Begun struct {
	Queued   []string  // the entries taken (see Begin.TakeQueued)
	Took     bool      // the queue was taken: no other release of the hold was under way
	Ended    bool      // see Ended
	Deadline time.Time // see Deadline
}

// BeginRelease records that a release of the hold is being sent, so that
// a renewal crossing a final release and finding the hold gone does not
// report a loss, and returns what the release needs to know of the lease,
// read in the same step (one lock of the session's scheduler, which every
// lock and unlock of the session shares, instead of one for each). Each
// BeginRelease that reports true must be followed by Settle.
func (l *Lease) BeginRelease(o Begin) (b Begun, ok bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if o.Releasable && !l.releasableLocked() {
		return b, false
	}
	if o.TakeQueued {
		b.Queued, b.Took = l.takeQueuedLocked()
	}
	b.Ended, b.Deadline = l.state != active, l.deadline
	l.releasing++
	return b, true
}

// Settle records the outcome of a release of units that BeginRelease
// announced: left is what the owner holds on the server after it, or -1
// if the release failed or found nothing (the lease then ends as
// released: its renewals stop, and the hold, if still there, expires by
// itself). The lease ends when nothing is left, or when the session has
// released all it acquired (what is left is another session's). If a
// renewal found the hold gone while the release was under way and the
// release left something, the hold is lost now.
func (l *Lease) Settle(left, units int64) {
	s := l.s
	s.mu.Lock()
	if l.releasing > 0 {
		l.releasing--
	}
	switch {
	case l.state != active:
	case left <= 0:
		s.endLocked(l, released, "")
	case l.gone && l.releasing == 0:
		s.loseLocked(l, "hold no longer on the server", nil)
	default:
		if l.held -= units; l.held <= 0 {
			s.endLocked(l, released, "")
		}
	}
	s.idleLocked()
	s.mu.Unlock()
}

// Release ends the lease: its hold was released, or a release failed and
// the hold is left to expire by itself, or a lost lease is forgotten.
// Renewals stop and Done is closed.
func (l *Lease) Release() {
	s := l.s
	s.mu.Lock()
	s.endLocked(l, released, "")
	s.idleLocked()
	s.mu.Unlock()
}

// Lose ends the lease as lost, for the given reason: a primitive learned
// that its hold is gone.
func (l *Lease) Lose(reason string) {
	s := l.s
	s.mu.Lock()
	if l.state == active {
		s.loseLocked(l, reason, nil)
	}
	s.idleLocked()
	s.mu.Unlock()
}

// Check looks at every lease at once, because the connection to the
// server was broken and made again: the server may have restarted without
// its data, or failed over to a replica that had not received it, and the
// holders must learn so now rather than at their next renewal. Watchdog
// leases are renewed, fixed ones checked.
func (s *Scheduler) Check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks++
	now := time.Now()
	for _, l := range s.queue {
		if l.spec.Renew != nil {
			l.next, l.checking, l.rechecks = now, true, 0
		}
	}
	heap.Init(&s.queue)
	s.armLocked()
}

const (
	// maxRechecks bounds the quick retries of a check after a
	// reconnection: the first calls may go out on pooled connections that
	// the reconnection's cause broke, each failing at once.
	maxRechecks = 8
	// recheckDelay is the pause between them.
	recheckDelay = 5 * time.Millisecond
)

// endLocked moves l to a final state, once, and forgets it: its owner
// learns of a loss from Done, and later finds nothing to release.
func (s *Scheduler) endLocked(l *Lease, to state, reason string) {
	if l.index >= 0 {
		heap.Remove(&s.queue, l.index)
	}
	if l.state != active {
		// A lease that expired and stayed indexed (see expireLocked),
		// now released or replaced: forget it now.
		s.unindexLocked(l)
		return
	}
	l.state = to
	if to == lost {
		l.reason = reason
	}
	s.count--
	if !l.expired {
		s.unindexLocked(l)
	}
	if len(l.queued) > 0 && s.hooks.Wake != nil {
		// Waiters queued behind the hold that no release carried would
		// otherwise wait out their heartbeat.
		s.hooks.Wake(l.spec.Channel, l.queued)
		l.queued = nil
	}
	if l.inflight != nil {
		close(l.inflight)
		l.inflight = nil
	}
	// The observer hears of the end before the holder wakes to it.
	if l.spec.Ended != nil {
		l.spec.Ended(to == lost, reason)
	}
	l.runEndHooksLocked()
	if l.done != nil {
		close(l.done)
	}
}

// expireLocked loses l at its deadline, the margin before the server's
// expiry: its holder is told (Done), but the lease stays indexed, and
// releasable, until the server's expiry, so that an unlock in the margin
// still releases the hold, as it would have just before, instead of
// leaving it on the server for others to wait out.
func (s *Scheduler) expireLocked(l *Lease, reason string) {
	l.expired = true
	s.loseLocked(l, reason, nil)
	time.AfterFunc(time.Until(l.serverExpiryLocked()), func() {
		s.mu.Lock()
		s.unindexLocked(l)
		s.mu.Unlock()
	})
}

// lapseLocked loses l, whose deadline has passed before a renewal could
// be sent: a fixed lease expired, a watchdog lease was not renewed in time.
func (s *Scheduler) lapseLocked(l *Lease) {
	if l.spec.Fixed {
		s.expireLocked(l, "lease expired")
	} else {
		s.expireLocked(l, "renewals failed until the lease ran out")
	}
}

func (s *Scheduler) loseLocked(l *Lease, reason string, err error) {
	s.endLocked(l, lost, reason)
	if log := l.spec.Logger; log != nil {
		if err != nil {
			log.Warn("dsync: hold lost", "name", l.spec.Name, "reason", reason, "error", err)
		} else {
			log.Warn("dsync: hold lost", "name", l.spec.Name, "reason", reason)
		}
	}
}

// armLocked makes the timer fire by the time the earliest lease is due.
func (s *Scheduler) armLocked() {
	if s.busy || len(s.queue) == 0 {
		return
	}
	s.armAtLocked(s.queue[0].next)
}

func (s *Scheduler) armAtLocked(at time.Time) {
	if !s.armed.IsZero() && !at.Before(s.armed) {
		return
	}
	s.armed = at
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(at), s.tick)
	} else {
		s.timer.Reset(time.Until(at))
	}
}

// idleLocked pulls the timer in to IdleRetire from now when no lease is
// left, so that the session hears of it then (a lock taken again meanwhile
// re-arms it without allocating).
func (s *Scheduler) idleLocked() {
	if s.count > 0 || s.busy || s.retired {
		return
	}
	s.armAtLocked(time.Now().Add(IdleRetire))
}

// IdleSoon arms the timer as the end of the last lease does, so that a
// session made for calls that keep nothing (a TryLock that found the
// primitive held, a query) hears IdleRetire later that it is idle: no
// lease ending or channel unsubscribed would ever tell it.
func (s *Scheduler) IdleSoon() {
	s.mu.Lock()
	s.idleLocked()
	s.mu.Unlock()
}

// tick runs a round: every lease due is renewed or expired, then the timer
// is armed for the next. With no lease left, the session is told.
func (s *Scheduler) tick() {
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		return
	}
	s.busy = true
	s.armed = time.Time{}
	if due := s.dueLocked(time.Now()); len(due) > 0 {
		// Renewals run on their own, each bounded by its leases'
		// deadlines, so that one stuck call delays no other lease's
		// expiry or renewal. They reschedule their leases when done.
		s.mu.Unlock()
		s.renew(due)
		s.mu.Lock()
	}
	s.busy = false
	s.armLocked()
	var unwatch func()
	idle := s.count == 0 && s.armed.IsZero()
	if idle {
		unwatch, s.unwatch = s.unwatch, nil
	}
	s.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	if idle && s.hooks.Idle != nil {
		s.hooks.Idle()
	}
}

// Retire marks the scheduler retired if it keeps no lease, so that Keep
// starts nothing more, and reports whether it did. Revive undoes it.
func (s *Scheduler) Retire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count > 0 || s.busy {
		return false
	}
	s.retired = true
	if s.timer != nil {
		s.timer.Stop()
		s.armed = time.Time{}
	}
	return true
}

// Revive undoes Retire.
func (s *Scheduler) Revive() {
	s.mu.Lock()
	s.retired = false
	s.mu.Unlock()
}

// dueLocked removes from the queue the leases to look at now: those whose
// time has come, and watchdog leases less than half an interval from due,
// which ride along in the same batch. Expired leases are lost here.
func (s *Scheduler) dueLocked(now time.Time) []*Lease {
	var due []*Lease
	for len(s.queue) > 0 {
		l := s.queue[0]
		early := time.Duration(0)
		if !l.spec.Fixed && !l.retrying {
			early = l.spec.TTL / 6
		}
		if l.next.Sub(now) > early {
			break
		}
		heap.Pop(&s.queue)
		if !now.Before(l.deadline) {
			s.lapseLocked(l)
			continue
		}
		due = append(due, l)
	}
	return due
}

// leaseHeap orders leases by next.
type leaseHeap []*Lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*Lease)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.index = -1
	*h = old[:len(old)-1]
	return l
}
