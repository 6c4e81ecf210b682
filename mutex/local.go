package mutex

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Queueing behind a hold of this process.
//
// Goroutines of one process often contend for the same mutex. While the
// mutex is held by a hold of this process, LockContext through a backend
// known to reach the same server does not ask the server at first: it
// queues behind that hold, and the hold's next release (the final one,
// or a partial one) registers the queued waiters on the server, in order,
// in its first attempt, in the script that hands the mutex on. A contended
// acquisition then usually costs one round trip, the release that hands
// the mutex over, instead of two, and the process stays quiet while the
// mutex is held. A waiter queues only while its backend's hub is
// subscribed to the mutex's channel, which it stays for a second after its
// last local waiter left (see hub.Linger); the first wait of a process
// asks the server.
//
// A backend is known to reach the hold's server if the hold was acquired
// through it, or if a script run through it (a release, an abandon, a
// ForceUnlock) handed the mutex, in this process, to the hold or to one of
// the holds before it in an unbroken chain of such hand-offs: the waiter's
// registration was on that backend's server. Backends that merely share a
// key name, such as the independent servers of a multi-lock, are never
// confused.
//
// A queued waiter sleeps until the hold's lease is known to run out or one
// heartbeat, whichever is sooner, and then asks the server itself. A hold
// that ends without a release of this process (it expired, was lost, or
// was taken by ForceUnlock in another process) therefore delays it by at
// most a heartbeat, where a registered waiter would be handed the mutex by
// ForceUnlock at once.
//
// A waiter that leaves the queue after a release took its entry waits for
// that release's first attempt to end before it asks the server or gives
// up, so that its own attempt, or its abandon, comes after the
// registration on the server.

// localWait is one acquisition's queueing behind holds of this process:
// the mutex's core.Local.
type localWait struct {
	m      *Mutex
	behind *localHold // the hold it is queued behind, if any
	entry  string     // under which it is queued
}

func (q *localWait) Before(ctx context.Context, owner, entry string, a wait.Try) (bool, time.Duration) {
	// Woken while queued behind a hold here, or a heartbeat later: ask
	// the server from now on.
	q.leave(ctx)
	if a.Prior == 0 && entry != "" {
		if h, lasts := q.m.queueBehind(owner, entry); h != nil {
			q.behind, q.entry = h, entry
			return true, lasts
		}
	}
	return false, 0
}

func (q *localWait) Leave(ctx context.Context, address string) {
	q.leave(ctx)
	q.m.dropHanded(address)
}

func (q *localWait) Held(owner, address string, l *lease.Lease) {
	q.m.holdLocal(owner, address, l)
}

// leave takes the waiter out of the queue it is in, if any. If a release
// already took its entry, it waits until that release has registered it:
// only then may the waiter's own attempt or abandon follow, or the
// registration would come after them.
func (q *localWait) leave(ctx context.Context) {
	if q.behind == nil {
		return
	}
	if sent := unqueue(q.behind, q.entry); sent != nil {
		select {
		case <-sent:
		case <-ctx.Done():
			return // still behind: the abandon waits again
		}
	}
	q.behind = nil
}

// A localHold is a hold of this process and the waiters queued behind it.
type localHold struct {
	key     string
	channel string
	b       backend.Backend // through which it is kept
	address string          // the waiter address it was handed to, if any
	since   time.Time       // when it was recorded

	// Guarded by locals.mu.
	owner    string            // "" until known
	reach    []backend.Backend // backends known to reach its server
	lease    *lease.Lease      // nil until its holder takes it
	queued   []string          // waiter entries, in arrival order
	closed   bool              // a release is under way: queue no more
	inflight chan struct{}     // closed when the release attempt carrying the taken entries ended
}

var locals struct {
	mu sync.Mutex
	m  map[string][]*localHold // by key
}

// stale reports whether h no longer stands for a hold. Called with
// locals.mu held.
func (h *localHold) stale(now time.Time) bool {
	if h.lease == nil {
		// Handed over, not yet taken: its taker is running, or gave up
		// and dropped it; this is the backstop.
		return now.Sub(h.since) > handoffLease
	}
	select {
	case <-h.lease.Done():
		return true
	default:
		return false
	}
}

// removeLocked drops h from the table and wakes whoever queued behind it,
// who would otherwise wait out a heartbeat.
func removeLocked(h *localHold) {
	hs := locals.m[h.key]
	if i := slices.Index(hs, h); i >= 0 {
		hs = slices.Delete(hs, i, i+1)
	}
	if len(hs) == 0 {
		delete(locals.m, h.key)
	} else {
		locals.m[h.key] = hs
	}
	if len(h.queued) > 0 {
		h.queued = nil
		hub.WakeLocal(h.channel)
	}
}

// queueBehind queues the waiter entry of owner behind a hold of this
// process on m, if there is one that m's backend reaches and owner is not
// its holder, and returns that hold and how long it is known to last (-1
// if unknown); otherwise it returns nil.
func (m *Mutex) queueBehind(owner, entry string) (*localHold, time.Duration) {
	h, l := m.queueBehindLocked(owner, entry)
	if h == nil || l == nil {
		return h, -1
	}
	// Should the hold expire without a release, as a fixed lease does,
	// the waiter asks the server then, as a registered one would.
	return h, max(0, time.Until(l.Deadline()))
}

func (m *Mutex) queueBehindLocked(owner, entry string) (*localHold, *lease.Lease) {
	locals.mu.Lock()
	defer locals.mu.Unlock()
	now := time.Now()
	for _, h := range slices.Clone(locals.m[m.h.Key]) {
		// Holds on other servers are none of m's business, not even to
		// tidy up.
		if !slices.Contains(h.reach, m.h.B) {
			continue
		}
		if h.stale(now) {
			removeLocked(h)
			continue
		}
		if h.closed || h.owner == owner {
			continue
		}
		h.queued = append(h.queued, entry)
		return h, h.lease
	}
	return nil, nil
}

// unqueue takes entry out of h's queue. If a release already took it, it
// returns a channel closed when that release has ended: the entry may be
// registered on the server only then.
func unqueue(h *localHold, entry string) <-chan struct{} {
	locals.mu.Lock()
	defer locals.mu.Unlock()
	if i := slices.Index(h.queued, entry); i >= 0 {
		h.queued = slices.Delete(h.queued, i, i+1)
		return nil
	}
	return h.inflight
}

// holdLocal records a hold of owner through m, taken as the waiter at
// address (if not empty) and kept by l.
func (m *Mutex) holdLocal(owner, address string, l *lease.Lease) {
	locals.mu.Lock()
	defer locals.mu.Unlock()
	// The record of a hand-off to address first: the releasing hold may
	// have the same owner and still be recorded.
	for _, match := range []func(*localHold) bool{
		func(h *localHold) bool { return address != "" && h.address == address },
		func(h *localHold) bool { return h.b == m.h.B && h.owner == owner },
	} {
		for _, h := range locals.m[m.h.Key] {
			if match(h) {
				h.owner, h.lease = owner, l
				if !slices.Contains(h.reach, m.h.B) {
					h.reach = append(h.reach, m.h.B)
				}
				return
			}
		}
	}
	m.addLocked(&localHold{b: m.h.B, owner: owner, address: address, lease: l, reach: []backend.Backend{m.h.B}})
}

func (m *Mutex) addLocked(h *localHold) {
	h.key, h.channel, h.since = m.h.Key, m.channel, time.Now()
	if locals.m == nil {
		locals.m = make(map[string][]*localHold)
	}
	locals.m[m.h.Key] = append(locals.m[m.h.Key], h)
}

// takeQueued returns the record of the hold kept by l, closed to new
// waiters for a release, and the entries queued behind it, which the
// release's first attempt registers. The release must call registered
// after that attempt, and end with settle. If m's backend is not known to
// reach the hold's server, the entries stay queued: the release, should it
// end the hold, wakes them to ask the server themselves.
func (m *Mutex) takeQueued(l *lease.Lease) (*localHold, []string) {
	locals.mu.Lock()
	defer locals.mu.Unlock()
	for _, h := range locals.m[m.h.Key] {
		if h.lease != l {
			continue
		}
		if h.closed {
			return nil, nil // another release of the owner's is under way
		}
		if !l.Reaches(m.h.B) {
			return h, nil
		}
		q := h.queued
		h.queued, h.closed = nil, true
		if len(q) > 0 {
			h.inflight = make(chan struct{})
		}
		return h, q
	}
	return nil, nil
}

// registered tells the waiters whose entries a release of h took that
// the attempt carrying them has ended: they may leave now.
func registered(h *localHold) {
	locals.mu.Lock()
	defer locals.mu.Unlock()
	if h.inflight != nil {
		close(h.inflight)
		h.inflight = nil
	}
}

// settle ends a release of h (which may be nil): the hold goes on if the
// owner has holds left, and is forgotten otherwise.
func settle(h *localHold, held bool) {
	if h == nil {
		return
	}
	registered(h)
	locals.mu.Lock()
	defer locals.mu.Unlock()
	if held {
		h.closed = false
	} else {
		removeLocked(h)
	}
}

// handedFrom returns the wait.HandOff callback of a script run through m
// for the hold h (which may be nil): a hold handed to a waiter of this
// process is recorded before the waiter wakes, reachable from m's backend,
// from every backend that reached h, and from the waiter's; it is dropped
// if the waiter had left.
func (m *Mutex) handedFrom(h *localHold) func(wait.Handed, bool) {
	return func(to wait.Handed, gone bool) {
		if gone {
			m.dropHanded(to.Address)
			return
		}
		locals.mu.Lock()
		defer locals.mu.Unlock()
		reach := []backend.Backend{m.h.B, to.Backend}
		if h != nil {
			reach = append(reach, h.reach...)
		}
		for _, n := range locals.m[m.h.Key] {
			if n.address == to.Address {
				reach = append(reach, n.reach...)
				n.reach = compactBackends(reach)
				if n.owner == "" {
					n.owner = to.Owner
				}
				return
			}
		}
		m.addLocked(&localHold{b: to.Backend, owner: to.Owner, address: to.Address, reach: compactBackends(reach)})
	}
}

// compactBackends returns bs without repeats.
func compactBackends(bs []backend.Backend) []backend.Backend {
	out := bs[:0:0]
	for _, b := range bs {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// forget drops the record of the hold kept by l, which ended without a
// release (it was lost), and wakes whoever queued behind it.
func (m *Mutex) forget(l *lease.Lease) {
	locals.mu.Lock()
	defer locals.mu.Unlock()
	for _, h := range locals.m[m.h.Key] {
		if h.lease == l {
			removeLocked(h)
			return
		}
	}
}

// dropHanded forgets a hold handed to the waiter at address that its
// waiter gave up: its abandon passed the mutex on.
func (m *Mutex) dropHanded(address string) {
	if address == "" {
		return
	}
	locals.mu.Lock()
	defer locals.mu.Unlock()
	for _, h := range locals.m[m.h.Key] {
		if h.address == address && h.lease == nil {
			removeLocked(h)
			return
		}
	}
}

// dropAll forgets every hold of this process on m that m's backend
// reaches: ForceUnlock took the mutex from whoever held it.
func (m *Mutex) dropAll() {
	locals.mu.Lock()
	defer locals.mu.Unlock()
	for _, h := range slices.Clone(locals.m[m.h.Key]) {
		if slices.Contains(h.reach, m.h.B) {
			removeLocked(h)
		}
	}
}
