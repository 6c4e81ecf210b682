// Package lease keeps holds alive: one scheduler per backend renews every
// watchdog lease on it in batched script calls, times out fixed leases, and
// tells each holder when its hold is lost.
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
// While a scheduler keeps leases it watches its backend's pub/sub
// connection (hub.Watch): when that connection breaks and is made again,
// the server may have restarted without its data, so every lease is
// renewed (a fixed one checked) at once, with quick retries for the pooled
// connections the same break left dead.
//
// The package also indexes the holds of this process by key, owner and
// role, whatever backend value keeps them, so that any handle on a lock can
// find its owner's hold, token and lost signal: a hold belongs to its
// owner, not to a handle or a backend value.
package lease

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/internal/registry"
	"github.com/dsyncgo/dsync/observe"
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

	// idleRetire is how soon a scheduler left without leases retires.
	idleRetire = time.Second
)

// Spec describes a hold to keep.
type Spec struct {
	Key   string // the primitive's main key; with Owner and Role, indexes the hold
	Owner string
	Role  string // what the owner holds: "x" exclusive, "r" read, ...
	ID    string // the hold's id on the server, unique across servers
	Name  string // for log messages
	TTL   time.Duration
	Token int64

	// Initial, if positive and shorter than TTL, is the hold's expiry on
	// the server when acquired: a hold handed to a waiter starts on a
	// short lease, so that a waiter that died frees it soon, and the
	// first renewal extends it to TTL. Only watchdog leases (with Renew)
	// may have one.
	Initial time.Duration

	// Renew is the primitive's batched renewal script; nil makes a fixed
	// lease that simply expires. The script receives the Keys of every
	// lease in the batch, one lease after another, and ARGV = the number
	// of keys per lease, the number of args per lease, then the Args of
	// every lease. It replies with one integer per lease: 1 renewed,
	// 0 gone.
	Renew *backend.Script
	Keys  []string
	Args  []any

	// Check, for a fixed lease, is the renewal script, given Args with a
	// lease of 0 ms so that it only checks that the hold is still there:
	// it is run when the connection to the server was broken and made
	// again (see Scheduler.check). Nil for a watchdog lease.
	Check *backend.Script

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

type state int

const (
	active state = iota
	lost
	released
)

// Lease is a hold being kept alive.
type Lease struct {
	spec Spec
	s    *Scheduler
	done chan struct{}

	reach []backend.Backend // guarded by held.mu: other backend values known to reach its server

	// Guarded by s.mu.
	state     state
	deadline  time.Time // lost when passed without a renewal
	next      time.Time // when the scheduler next looks at it
	retrying  bool      // the last renewal failed: next is a retry, not a due time
	checking  bool      // due for a check after a reconnection (see Scheduler.check)
	gone      bool      // a renewal found it gone while a release was under way (next to the bools: a Lease stays in its size class)
	expired   bool      // lost at its deadline, so perhaps still on the server for the margin (see Releasable)
	indexed   bool      // in the held index; guarded by held.mu
	rechecks  int       // checks failed since that reconnection
	releasing int       // releases under way
	index     int       // in s.queue, or -1
}

// Done returns a channel closed when the hold ends: lost, or released by
// its final unlock.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Token returns the fencing token the hold was granted with.
func (l *Lease) Token() int64 { return l.spec.Token }

// Renewed reports whether the watchdog renews the lease (it is not
// fixed).
func (l *Lease) Renewed() bool { return l.spec.Renew != nil }

// TTL returns the lease the hold is renewed to, or its fixed lease.
func (l *Lease) TTL() time.Duration { return l.spec.TTL }

// ID returns the hold's id on the server.
func (l *Lease) ID() string { return l.spec.ID }

// Owner returns the owner id of the hold.
func (l *Lease) Owner() string { return l.spec.Owner }

// Backend returns the backend through which the hold is kept.
func (l *Lease) Backend() backend.Backend { return l.s.b }

// Lost reports whether the hold was lost rather than released or still
// held.
func (l *Lease) Lost() bool {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.state == lost
}

// Deadline returns the time until which the hold is known valid: its
// expiry on the server, as far as the client can tell, less the margin.
func (l *Lease) Deadline() time.Time {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.deadline
}

// Scheduler renews the leases of one backend.
//
// It owns no goroutine: a timer fires when the earliest lease is due, and
// its callback runs the round. Taking and releasing locks therefore costs
// no goroutine start or thread wake-up, and an idle backend costs nothing.
type Scheduler struct {
	b backend.Backend

	mu    sync.Mutex
	queue leaseHeap
	count int         // leases not yet ended
	timer *time.Timer // runs tick
	armed time.Time   // when timer fires; zero if stopped
	busy  bool        // a round is running; it re-arms the timer when done

	renewing chan struct{} // a token per renewal call in flight

	unwatch func() // ends the scheduler's hub.Watch

	// Observed by tests and benchmarks.
	calls int64
}

type holdKey struct{ key, owner, role string }

var schedulers registry.Registry[*Scheduler]

// held indexes the leases of this process that have not ended. Lock order:
// a scheduler's mu, then held.mu.
var held struct {
	mu sync.Mutex
	m  map[holdKey][]*Lease
}

func (l *Lease) holdKey() holdKey { return holdKey{l.spec.Key, l.spec.Owner, l.spec.Role} }

func index(l *Lease) {
	held.mu.Lock()
	defer held.mu.Unlock()
	if held.m == nil {
		held.m = make(map[holdKey][]*Lease)
	}
	k := l.holdKey()
	held.m[k] = append(held.m[k], l)
	l.indexed = true
}

func unindex(l *Lease) {
	held.mu.Lock()
	defer held.mu.Unlock()
	if !l.indexed {
		return
	}
	l.indexed = false
	k := l.holdKey()
	ls := held.m[k]
	for i, x := range ls {
		if x == l {
			ls = append(ls[:i:i], ls[i+1:]...)
			break
		}
	}
	if len(ls) == 0 {
		delete(held.m, k)
	} else {
		held.m[k] = ls
	}
}

// Start begins keeping a hold acquired by a call sent at sentAt. It
// replaces any earlier lease of the same key, owner and role on b, which
// ends.
func Start(b backend.Backend, spec Spec, sentAt time.Time) *Lease {
	var l *Lease
	schedulers.Do(b, func() *Scheduler {
		s := &Scheduler{b: b, renewing: make(chan struct{}, MaxRenewing)}
		s.unwatch = hub.Watch(b, s.check)
		return s
	}, func(s *Scheduler) bool {
		l = s.start(spec, sentAt)
		return false
	})
	if reason, ok := wasTaken(spec.Key, spec.ID); ok {
		LoseHold(spec.Key, spec.ID, reason)
	}
	return l
}

// taken remembers the ids of holds that LoseHold found no lease for: a
// hold handed to a waiter of this process that has not started keeping it
// yet. The waiter may still accept the hand-off; its lease then starts
// lost. A waiter accepts a hand-off within a second or two of it, so ids
// are kept for takenMemory, and at most maxTaken of them.
var taken struct {
	mu sync.Mutex
	m  map[string]takenHold
}

type takenHold struct {
	at     time.Time
	reason string
}

const (
	takenMemory = time.Minute
	maxTaken    = 4096
)

func takenKey(key, id string) string { return key + "\x00" + id }

func rememberTaken(key, id, reason string) {
	taken.mu.Lock()
	defer taken.mu.Unlock()
	now := time.Now()
	if taken.m == nil {
		taken.m = make(map[string]takenHold)
	}
	if len(taken.m) >= maxTaken {
		for k, t := range taken.m {
			if now.Sub(t.at) > takenMemory || len(taken.m) >= maxTaken {
				delete(taken.m, k)
			}
		}
	}
	taken.m[takenKey(key, id)] = takenHold{now, reason}
}

// wasTaken reports, once, whether the hold with the given id was taken
// before its lease started, and why.
func wasTaken(key, id string) (string, bool) {
	taken.mu.Lock()
	defer taken.mu.Unlock()
	k := takenKey(key, id)
	t, ok := taken.m[k]
	if !ok {
		return "", false
	}
	delete(taken.m, k)
	return t.reason, time.Since(t.at) <= takenMemory
}

// Find returns the leases of key, owner and role kept through b, or
// through another backend value known to reach the same server (see
// Reach), the one kept through b first.
func Find(b backend.Backend, key, owner, role string) []*Lease {
	held.mu.Lock()
	defer held.mu.Unlock()
	var own, others []*Lease
	for _, l := range held.m[holdKey{key, owner, role}] {
		switch {
		case l.s.b == b:
			own = append(own, l)
		case slices.Contains(l.reach, b):
			others = append(others, l)
		}
	}
	return append(own, others...)
}

// Anywhere returns the leases of key, owner and role in this process,
// whatever backend value keeps them: holds that may be on b's server, or on
// another with a lock of the same name.
func Anywhere(key, owner, role string) []*Lease {
	held.mu.Lock()
	defer held.mu.Unlock()
	return slices.Clone(held.m[holdKey{key, owner, role}])
}

// Get returns the lease of key, owner and role kept through b, or nil.
func Get(b backend.Backend, key, owner, role string) *Lease {
	held.mu.Lock()
	defer held.mu.Unlock()
	for _, l := range held.m[holdKey{key, owner, role}] {
		if l.s.b == b {
			return l
		}
	}
	return nil
}

// Reach records that b reaches the server of l's hold, which a script run
// through b proved by naming the hold's id.
func (l *Lease) Reach(b backend.Backend) {
	held.mu.Lock()
	defer held.mu.Unlock()
	if l.s.b != b && !slices.Contains(l.reach, b) {
		l.reach = append(l.reach, b)
	}
}

// LoseHold ends as lost the lease of key whose hold has the given id,
// whoever owns it: ForceUnlock took that hold. If no lease keeps it yet,
// one that starts for it within a minute starts lost.
func LoseHold(key, id, reason string) {
	if id == "" {
		return
	}
	held.mu.Lock()
	var found *Lease
	for k, ls := range held.m {
		if k.key != key {
			continue
		}
		for _, l := range ls {
			if l.spec.ID == id {
				found = l
			}
		}
	}
	held.mu.Unlock()
	if found == nil {
		rememberTaken(key, id, reason)
		return
	}
	s := found.s
	s.mu.Lock()
	if found.state == active {
		s.loseLocked(found, reason, nil)
	}
	retire := s.idleLocked()
	s.mu.Unlock()
	if retire {
		s.forgetIfIdle()
	}
}

// Reaches reports whether b is known to reach the server of l's hold.
func (l *Lease) Reaches(b backend.Backend) bool {
	held.mu.Lock()
	defer held.mu.Unlock()
	return l.s.b == b || slices.Contains(l.reach, b)
}

// ByID returns the lease of key, owner and role whose hold has the given
// id, through whichever backend value it is kept, or nil.
func ByID(key, owner, role, id string) *Lease {
	if id == "" {
		return nil
	}
	held.mu.Lock()
	defer held.mu.Unlock()
	for _, l := range held.m[holdKey{key, owner, role}] {
		if l.spec.ID == id {
			return l
		}
	}
	return nil
}

// Stats reports, for b, the leases being kept and the renewal calls made
// so far.
func Stats(b backend.Backend) (leases int, calls int64) {
	schedulers.Do(b, nil, func(s *Scheduler) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		leases, calls = s.count, s.calls
		return false
	})
	return leases, calls
}

func (s *Scheduler) start(spec Spec, sentAt time.Time) *Lease {
	l := &Lease{spec: spec, s: s, done: make(chan struct{}), index: -1}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := Get(s.b, spec.Key, spec.Owner, spec.Role); old != nil {
		s.endLocked(old, released)
	}
	s.count++
	index(l)
	ttl := spec.TTL
	if spec.Initial > 0 && spec.Initial < ttl && spec.Renew != nil {
		ttl = spec.Initial
	}
	l.renewedLocked(sentAt, ttl)
	heap.Push(&s.queue, l)
	s.armLocked()
	return l
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
	if l.spec.Renew == nil {
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

// BeginRelease records that a release of the hold is being sent, so that
// a renewal crossing a final release and finding the hold gone does not
// report a loss. Each BeginRelease must be followed by Kept or Release.
func (l *Lease) BeginRelease() {
	l.s.mu.Lock()
	l.releasing++
	l.s.mu.Unlock()
}

// Kept records that a release left the hold in place (the owner has holds
// left). If a renewal found the hold gone meanwhile, the hold is lost now.
func (l *Lease) Kept() {
	s := l.s
	s.mu.Lock()
	if l.releasing > 0 {
		l.releasing--
	}
	retire := false
	if l.state == active && l.gone && l.releasing == 0 {
		s.loseLocked(l, "hold no longer on the server", nil)
		retire = s.idleLocked()
	}
	s.mu.Unlock()
	if retire {
		s.forgetIfIdle()
	}
}

// Release ends the lease because its hold was released, or because a
// release failed and the hold is left to expire by itself, or to forget a
// lost lease. Renewals stop and its Done channel is closed.
func (l *Lease) Release() {
	s := l.s
	s.mu.Lock()
	s.endLocked(l, released)
	retire := s.idleLocked()
	s.mu.Unlock()
	if retire {
		s.forgetIfIdle()
	}
}

// idleLocked pulls the timer in when no lease is left, so that the
// scheduler retires within idleRetire (a lock taken again meanwhile
// re-arms it without allocating), and reports whether there is no timer
// to do so, in which case the caller retires it now.
func (s *Scheduler) idleLocked() (retireNow bool) {
	if s.count > 0 || s.busy {
		return false
	}
	if s.armed.IsZero() {
		return true
	}
	if at := time.Now().Add(idleRetire); at.Before(s.armed) {
		s.armed = at
		s.timer.Reset(idleRetire)
	}
	return false
}

// forgetIfIdle drops s from the registry once it has nothing to do.
func (s *Scheduler) forgetIfIdle() {
	dropped := false
	schedulers.Do(s.b, nil, func(cur *Scheduler) bool {
		if cur != s {
			return false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		dropped = !s.busy && s.count == 0
		return dropped
	})
	if dropped {
		s.unwatch()
	}
}

// check looks at every lease at once, because the connection to the
// server was broken and made again (see hub.Watch): the server may have
// restarted without its data, or failed over to a replica that had not
// received it, and the holders must learn so now rather than at their next
// renewal. Watchdog leases are renewed, fixed ones checked (Spec.Check).
func (s *Scheduler) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, l := range s.queue {
		if l.spec.Renew != nil || l.spec.Check != nil {
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
func (s *Scheduler) endLocked(l *Lease, to state) {
	s.endWhyLocked(l, to, "")
}

func (s *Scheduler) endWhyLocked(l *Lease, to state, reason string) {
	if l.index >= 0 {
		heap.Remove(&s.queue, l.index)
	}
	if l.state != active {
		// A lease that expired and stayed indexed (see expireLocked),
		// now released or replaced: forget it now.
		unindex(l)
		return
	}
	l.state = to
	s.count--
	if !l.expired {
		unindex(l)
	}
	// The observer hears of the end before the holder wakes to it.
	if l.spec.Ended != nil {
		l.spec.Ended(to == lost, reason)
	}
	close(l.done)
}

// expireLocked loses l at its deadline, the margin before the server's
// expiry: its holder is told (Done), but the lease stays indexed, and
// releasable, until the server's expiry, so that an unlock in the margin
// still releases the hold, as it would have just before, instead of
// leaving it on the server for others to wait out.
func (s *Scheduler) expireLocked(l *Lease, reason string) {
	l.expired = true
	s.loseLocked(l, reason, nil)
	time.AfterFunc(time.Until(l.serverExpiryLocked()), func() { unindex(l) })
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
	return l.state == active || l.expired && time.Now().Before(l.serverExpiryLocked())
}

func (s *Scheduler) loseLocked(l *Lease, reason string, err error) {
	s.endWhyLocked(l, lost, reason)
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
	at := s.queue[0].next
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

// tick runs a round: every lease due is renewed or expired, then the timer
// is armed for the next.
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
	idle := s.count == 0
	s.mu.Unlock()
	if idle {
		s.forgetIfIdle()
	}
}

// dueLocked removes from the queue the leases to look at now: those whose
// time has come, and watchdog leases less than half an interval from due,
// which ride along in the same batch. Expired leases are lost here.
func (s *Scheduler) dueLocked(now time.Time) []*Lease {
	var due []*Lease
	for len(s.queue) > 0 {
		l := s.queue[0]
		early := time.Duration(0)
		if l.spec.Renew != nil && !l.retrying {
			early = l.spec.TTL / 6
		}
		if l.next.Sub(now) > early {
			break
		}
		heap.Pop(&s.queue)
		if !now.Before(l.deadline) {
			if l.spec.Renew == nil {
				s.expireLocked(l, "lease expired")
			} else {
				s.expireLocked(l, "renewals failed until the lease ran out")
			}
			continue
		}
		due = append(due, l)
	}
	return due
}

type groupKey struct {
	script       *backend.Script
	nkeys, nargs int
	slot         uint16
}

type group struct {
	groupKey
	leases []*Lease
}

// renew sends the renewals of due leases, grouped by script (and by slot
// on a sharded backend), and reschedules them by the outcome.
func (s *Scheduler) renew(due []*Lease) {
	sharded := backend.IsSharded(s.b)
	groups := map[groupKey]*group{}
	var order []*group
	for _, l := range due {
		script := l.spec.Renew
		if script == nil {
			script = l.spec.Check // a fixed lease due for a check
		}
		k := groupKey{script: script, nkeys: len(l.spec.Keys), nargs: len(l.spec.Args)}
		if sharded {
			k.slot = keys.Slot(l.spec.Key)
		}
		g := groups[k]
		if g == nil || len(g.leases) == MaxBatch {
			g = &group{groupKey: k}
			groups[k] = g
			order = append(order, g)
		}
		g.leases = append(g.leases, l)
	}
	go s.dispatch(s.bundle(order))
}

// bundle is the groups sent in one call: one group through Eval, or
// several through one EvalBatch.
type bundle []*group

// bundle puts groups into bundles. A sharded backend that implements
// backend.Batcher gets up to MaxBundle groups (typically one per slot) per
// EvalBatch, which it pipelines per node; otherwise each group is a call.
func (s *Scheduler) bundle(order []*group) []bundle {
	_, batcher := s.b.(backend.Batcher)
	size := 1
	if batcher && backend.IsSharded(s.b) {
		size = MaxBundle
	}
	bundles := make([]bundle, 0, (len(order)+size-1)/size)
	for len(order) > 0 {
		n := min(size, len(order))
		bundles = append(bundles, bundle(order[:n:n]))
		order = order[n:]
	}
	return bundles
}

func groupsOf(bundles []bundle) []*group {
	var gs []*group
	for _, bd := range bundles {
		gs = append(gs, bd...)
	}
	return gs
}

// dispatch sends the bundles' renewals, at most MaxRenewing calls at a time. While
// it waits for a call to end, the leases still waiting are watched: one
// whose deadline passes is lost then, as the server expires its key,
// however long the calls in flight take.
func (s *Scheduler) dispatch(pending []bundle) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for len(pending) > 0 {
		earliest, ok := s.earliestDeadline(groupsOf(pending))
		if !ok {
			return // every lease waiting ended meanwhile
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(earliest))
		} else {
			timer.Reset(time.Until(earliest))
		}
		select {
		case s.renewing <- struct{}{}:
			timer.Stop()
			bd := pending[0]
			pending = pending[1:]
			go func() {
				defer func() { <-s.renewing }()
				s.renewBundle(bd)
			}()
		case <-timer.C:
			s.expire(groupsOf(pending))
		}
	}
}

// earliestDeadline returns the earliest deadline among the active leases
// of groups, and false if none is active.
func (s *Scheduler) earliestDeadline(groups []*group) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var earliest time.Time
	for _, g := range groups {
		for _, l := range g.leases {
			if l.state == active && l.index < 0 && (earliest.IsZero() || l.deadline.Before(earliest)) {
				earliest = l.deadline
			}
		}
	}
	return earliest, !earliest.IsZero()
}

// expire loses the leases of groups whose deadline has passed before their
// renewal could be sent.
func (s *Scheduler) expire(groups []*group) {
	s.mu.Lock()
	now := time.Now()
	for _, g := range groups {
		for _, l := range g.leases {
			if l.state == active && l.index < 0 && !now.Before(l.deadline) {
				s.expireLocked(l, "renewals failed until the lease ran out")
			}
		}
	}
	retire := s.idleLocked()
	s.mu.Unlock()
	if retire {
		s.forgetIfIdle()
	}
}

// renewBundle sends the renewals of a bundle's groups: with Eval for a
// single group, with one EvalBatch for several.
func (s *Scheduler) renewBundle(bd bundle) {
	batcher, _ := s.b.(backend.Batcher)
	if len(bd) == 1 || batcher == nil {
		for _, g := range bd {
			s.renewGroup(g)
		}
		return
	}
	type part struct {
		leases []*Lease
		call   backend.Call
	}
	s.mu.Lock()
	now := time.Now()
	var parts []part
	var earliest time.Time
	for _, g := range bd {
		leases, ks, args, e := g.prepareLocked(now)
		if len(leases) == 0 {
			continue
		}
		parts = append(parts, part{leases, backend.Call{Script: g.script, Keys: ks, Args: args}})
		if earliest.IsZero() || e.Before(earliest) {
			earliest = e
		}
	}
	if len(parts) == 0 {
		s.mu.Unlock()
		return
	}
	s.calls++
	s.mu.Unlock()

	calls := make([]backend.Call, len(parts))
	for i, p := range parts {
		calls[i] = p.call
	}
	sent := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), earliest)
	results, err := batcher.EvalBatch(ctx, calls)
	cancel()
	if err == nil && len(results) != len(calls) {
		err = fmt.Errorf("%w: %d results for a batch of %d calls", dsync.ErrUnexpectedReply, len(results), len(calls))
	}

	took := time.Since(sent)
	s.mu.Lock()
	o := observe.For(s.b)
	for i, p := range parts {
		perr := err
		var gone int
		if err != nil {
			gone = s.applyLocked(p.leases, nil, err, sent)
		} else {
			perr = results[i].Err
			gone = s.applyLocked(p.leases, results[i].Reply, results[i].Err, sent)
		}
		o.ReportRenewed(observe.Renewal{Leases: len(p.leases), Failed: perr != nil, Gone: gone, Took: took})
	}
	s.armLocked()
	retire := s.idleLocked()
	s.mu.Unlock()
	if retire {
		s.forgetIfIdle()
	}
}

// prepareLocked returns the group's leases still to renew (those that
// ended, or were lost at their deadline, while the group waited for its
// turn are left out), the renewal call's keys and args, and the earliest
// deadline among them.
func (g *group) prepareLocked(now time.Time) (leases []*Lease, ks []string, args []any, earliest time.Time) {
	leases = make([]*Lease, 0, len(g.leases))
	for _, l := range g.leases {
		if l.state == active && l.index < 0 && now.Before(l.deadline) {
			leases = append(leases, l)
		}
	}
	if len(leases) == 0 {
		return nil, nil, nil, time.Time{}
	}
	ks = make([]string, 0, len(leases)*g.nkeys)
	args = make([]any, 0, 2+len(leases)*g.nargs)
	args = append(args, g.nkeys, g.nargs)
	earliest = leases[0].deadline
	for _, l := range leases {
		ks = append(ks, l.spec.Keys...)
		args = append(args, l.spec.Args...)
		if l.deadline.Before(earliest) {
			earliest = l.deadline
		}
	}
	return leases, ks, args, earliest
}

func (s *Scheduler) renewGroup(g *group) {
	s.mu.Lock()
	leases, ks, args, earliest := g.prepareLocked(time.Now())
	if len(leases) == 0 {
		s.mu.Unlock()
		return
	}
	s.calls++
	s.mu.Unlock()

	sent := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), earliest)
	reply, err := s.b.Eval(ctx, g.script, ks, args...)
	cancel()
	took := time.Since(sent)

	s.mu.Lock()
	gone := s.applyLocked(leases, reply, err, sent)
	observe.For(s.b).ReportRenewed(observe.Renewal{Leases: len(leases), Failed: err != nil, Gone: gone, Took: took})
	s.armLocked()
	retire := s.idleLocked()
	s.mu.Unlock()
	if retire {
		s.forgetIfIdle()
	}
}

// applyLocked reschedules leases by the outcome of their renewal call,
// sent at sent, and returns how many the call found gone.
func (s *Scheduler) applyLocked(leases []*Lease, reply any, err error, sent time.Time) (gone int) {
	var results []int64
	if err == nil {
		results, err = backend.Ints(reply, len(leases))
	}
	crossSlot := isCrossSlot(err)
	logged := map[*slog.Logger]bool{}
	now := time.Now()
	for i, l := range leases {
		if l.state != active || l.index >= 0 {
			continue // released, or re-acquired and rescheduled, meanwhile
		}
		transient := err != nil && !errors.Is(err, dsync.ErrClosed) && !crossSlot
		switch {
		case l.checking && transient && l.rechecks < maxRechecks:
			l.rechecks++
			l.next = now.Add(recheckDelay)
		case l.spec.Renew == nil && (err == nil && results[i] == 1 || transient):
			// A fixed lease checked: it stays as it was, to expire at
			// its deadline. A check that kept failing is left; the next
			// reconnection checks again.
			l.checking = false
			l.next = l.deadline
		case err == nil && results[i] == 1:
			l.checking = false
			// An Extend while the call was in flight may have moved the
			// deadline further than this renewal does: it stays.
			l.renewedLocked(sent, l.spec.TTL)
		case err == nil && l.releasing > 0:
			// A final release got there first, which is not a loss; if
			// the release turns out partial, Kept reports the loss.
			l.gone = true
			continue
		case err == nil:
			gone++
			s.loseLocked(l, "hold no longer on the server", nil)
			continue
		case errors.Is(err, dsync.ErrClosed):
			s.loseLocked(l, "backend closed", err)
			continue
		case crossSlot:
			// Retrying sends the same keys: the batch can never succeed.
			if log := l.spec.Logger; log != nil && !logged[log] {
				logged[log] = true
				log.Error("dsync: lease renewal refused: one call named keys of several Redis Cluster hash slots (CROSSSLOT); a backend over a cluster must implement backend.Sharded",
					"name", l.spec.Name, "backend", fmt.Sprintf("%T", s.b), "leases", len(leases), "error", err)
			}
			s.loseLocked(l, "renewal batch spans hash slots (CROSSSLOT)", err)
			continue
		default:
			if log := l.spec.Logger; log != nil && i == 0 {
				log.Debug("dsync: lease renewal failed; retrying", "name", l.spec.Name, "error", err)
			}
			retry := max(min(l.spec.TTL/10, time.Second), 10*time.Millisecond)
			l.retrying, l.checking = true, false
			l.next = now.Add(retry)
			if l.next.After(l.deadline) {
				l.next = l.deadline
			}
		}
		heap.Push(&s.queue, l)
	}
	return gone
}

// isCrossSlot reports whether err is a cluster's refusal of a call whose
// keys span hash slots.
func isCrossSlot(err error) bool {
	var se *backend.ServerError
	return errors.As(err, &se) && se.Prefix() == "CROSSSLOT"
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
