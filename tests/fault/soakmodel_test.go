package fault

// The soak's checkers: each group's events are rebuilt into holds (who held
// what, when each hold was surely valid, when the server may have ended
// it), checked for overlaps of lease-valid holds, and handed to porcupine
// with a model of the group's primitive. Every rule a model enforces is one
// the package docs promise; where a doc allows two outcomes (an unlock whose
// reply was lost, a key evicted while held), the model allows both.

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// soakReport is what a group's checker found.
type soakReport struct {
	summary  string
	overlaps int
	problems []string // each a violation
}

func (r soakReport) String() string { return r.summary }

func (r *soakReport) fail(format string, a ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, a...))
}

// verdict reports porcupine's result on history for model, unless Ok: a
// history that is not linearizable, or one it could not decide in time.
func (r *soakReport) verdict(res porcupine.CheckResult, history, model string) {
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		r.fail("%s is not linearizable for %s (Illegal)", history, model)
	default:
		r.fail("%s: porcupine could not decide in %v whether it is linearizable for %s (%s)", history, checkTimeout(), model, res)
	}
}

// checkTimeout bounds each porcupine check: 30s, or half the soak's
// length for a longer soak, whose histories are longer. A check that runs
// out (Unknown) is a failure: what was not checked did not pass.
func checkTimeout() time.Duration { return max(30*time.Second, *soakFor/2) }

// never is the time of what never happened: the reply of an operation whose
// client was killed under way, the end of a hold nothing bounds.
const never = 1 << 62

// soakHold is one hold of a soak client, rebuilt from its events.
type soakHold struct {
	client     int
	token      int64
	told       int64 // token 0: the token a re-entry told (see buildHolds), or 0
	n          int64 // semaphore: the permits of the first acquisition
	call, from int64 // acquisition sent, reply received
	until      int64 // validity: unlock sent, or lease less margin
	relCall    int64 // when an unlock was sent, or 0
	relN       int64 // the permits it gives back
	lost       bool  // Done closed before the unlock, or an inner unlock found it gone
	rel        *soakEvent
	freed      *soakEvent // the unlock, known to have succeeded, that gave it back whole
	// Fixed leases: the server expires the hold a lease after the script
	// that granted it, or that re-entered it last, ran.
	expCall, expRet int64
	inner           []porcupine.Operation // re-entries and inner unlocks, in order
	depth           int                   // locks not yet unlocked, as the client counts them
	unsure          bool                  // a re-entry's token, or the hold's, was unknown: it may have been a new hold
	id              int                   // the model's name for the hold
	optCall, optRet int64                 // unsure: when the first hold may have expired before the re-entry took a new one
	evicted         []evictWindow         // when an eviction may have ended it
	evictFrom       int64                 // watchdog: when an eviction may have ended it first, or never
	blindEnter      int64                 // watchdog: the return of the last re-entry whose token was unknown, or 0
	newAt           []int64               // fixed leases: when each re-entry that may have taken a new hold was sent
}

// evictWindow is when an eviction ended a hold, if sure, or may have.
type evictWindow struct {
	from, to int64
	sure     bool
}

// soakHolds is a group's (or one side's) holds, with what else its events
// told.
type soakHolds struct {
	holds    []*soakHold
	regOps   []porcupine.Operation
	acquired int // holds, counting those re-entries took anew
	failed   int // acquisitions that failed
	lost     int // unlocks that found nothing to release
	reenter  int // re-entries
	told     int // watchdog: Done closed before the unlock
	evicted  int // holds an eviction may have ended
	watchdog bool
	read     bool // the read side of a read-write lock
	partial  bool // see holdOpts
}

// holdOpts say what a group's holds are.
type holdOpts struct {
	watchdog bool // renewed by the watchdog, not on a fixed lease
	read     bool // the read side of a read-write lock
	// partial: an unlock that fails because the hold was lost may still
	// give back part of it, so that it is free by the unlock's return (a
	// multilock: "every member it acquired" is released, and the error
	// names the member that was lost).
	partial bool
}

// buildHolds rebuilds the holds of a group from its events: acq, enter
// (re-entry, or a semaphore's further acquisition by the owner), leave
// (an inner unlock), rel? and rel (the outer unlock announced, and done),
// read? read write? write (fenced register operations), fail, lost (Done
// closed), renewed (watchdog); and the parent's notes: paused, killed,
// evicted (a window in which keys of the group that carry holds were
// evicted). Holds have a fixed lease, or the watchdog renews them.
//
// Operations may be matched to holds by token: an event's token is that of
// the hold it belongs to (0 when unknown, and always for tokenless holds,
// whose events then belong to the client's current hold).
func buildHolds(events []soakEvent, lease time.Duration, o holdOpts) *soakHolds {
	watchdog, read := o.watchdog, o.read
	s := &soakHolds{watchdog: watchdog, read: read, partial: o.partial}
	margin := lease/100 + 2*time.Millisecond
	byClient := map[int]*soakHold{}
	var stops []*soakEvent
	var windows [][2]int64
	renewals := map[int][]int64{} // watchdog: renewals' send times, per client
	// An operation announced and never completed (its client was killed)
	// may have taken effect at any time after it began.
	pending := map[int]*soakEvent{}
	// An unlock, or a loss, is the client's current hold's, or with a
	// token its hold of that token: after a re-entry took a new hold
	// (the first was lost), the outer unlock names the first.
	byToken := map[[2]int64]*soakHold{}
	holdOf := func(e *soakEvent) *soakHold {
		if h := byClient[e.client]; h != nil && h.token == e.token {
			return h
		}
		if e.token != 0 {
			return byToken[[2]int64{int64(e.client), e.token}]
		}
		return nil
	}
	regOp := func(e *soakEvent) porcupine.Operation {
		return porcupine.Operation{ClientId: e.client,
			Input: regInput{write: strings.HasPrefix(e.kind, "write"), token: e.token, value: e.value}, Call: e.call,
			Output: regOutput{ok: e.ok, known: e.known, value: e.value}, Return: e.ret}
	}
	input := func(op string, e *soakEvent, h *soakHold) lockInput {
		return lockInput{op: op, client: e.client, token: e.token, hold: h.id, read: read, n: e.value, tells: h.told != 0 && e.token == h.told}
	}
	for i := range events {
		e := &events[i]
		switch e.kind {
		case "read?", "write?", "rel?":
			if p := pending[e.client]; p != nil {
				p.ret = never
				if p.kind != "rel?" {
					s.regOps = append(s.regOps, regOp(p))
				}
			}
			pending[e.client] = e
			if h := holdOf(e); e.kind == "rel?" && h != nil {
				h.until = min(h.until, e.call)
				h.relCall, h.relN = e.call, e.value
			}
			continue
		}
		switch e.kind {
		case "acq", "fail", "read", "write", "rel", "enter", "leave":
			// Only the client's own completions end its announced
			// operation: notes of a pause or a kill (the parent's), a
			// renewal or a loss (other goroutines) do not.
			delete(pending, e.client)
		}
		switch e.kind {
		case "fail":
			s.failed++
		case "enter":
			h := byClient[e.client]
			if !e.ok || h == nil {
				break
			}
			if e.token == 0 || e.token == h.token || h.token == 0 && h.told == 0 {
				// A re-entry (or, with its token unknown, perhaps a new
				// hold: the model allows both). With the hold's token
				// unknown (its Token() failed) and the re-entry's known,
				// it tells the hold's token, drawn by then (a plain
				// hold's is drawn on demand), or the first hold was lost
				// and it took a new one: the model allows both too, and
				// the client's events name the hold by either token.
				same := e.token != 0 && e.token == h.token
				if h.token == 0 && e.token != 0 {
					h.told = e.token
					byToken[[2]int64{int64(e.client), e.token}] = h
				}
				if !watchdog && (e.token == 0 || h.told != 0 && e.token == h.told) {
					h.newAt = append(h.newAt, e.call)
				}
				h.depth++
				s.reenter++
				h.inner = append(h.inner, porcupine.Operation{ClientId: e.client, Input: input("enter", e, h),
					Call: e.call, Output: e.token, Return: e.ret})
				// The same token: the script found the hold on the server
				// (perhaps in the expiry margin, after the client's lease
				// ran out) and extended it to a full lease from when it
				// ran; so did one that ran before the hold's earliest
				// expiry. Otherwise, with the token unknown, it may have
				// taken a new hold after the first expired.
				sure := same || e.ret < h.expCall
				if !sure {
					h.unsure = true
					h.optCall, h.optRet = h.expCall, h.expRet
					if watchdog {
						h.optCall, h.optRet = h.call+int64(lease), never
					}
				}
				if watchdog && !same {
					// A renewed hold may also have been evicted before
					// the re-entry (see below).
					h.blindEnter = max(h.blindEnter, e.ret)
				}
				if !watchdog {
					h.expCall, h.expRet = e.call+int64(lease), e.ret+int64(lease)
				}
				if e.token != 0 {
					// Valid a lease (less the margin) from the re-entry,
					// like a renewal: bounds below a pause or a loss too.
					renewals[e.client] = append(renewals[e.client], e.call)
				}
				if !watchdog && sure {
					h.until = max(h.until, e.call+int64(lease-margin))
				}
				break
			}
			// The hold was lost before the re-entry, which took a new one.
			fallthrough
		case "acq":
			s.acquired++
			h := &soakHold{client: e.client, token: e.token, n: e.value, call: e.call, from: e.ret, id: s.nextID(),
				until: e.call + int64(lease-margin), expCall: e.call + int64(lease), expRet: e.ret + int64(lease), depth: 1, evictFrom: never}
			if watchdog {
				// Renewed: valid until its holder is told (lost), unlocks,
				// is killed, or is paused past its lease (below).
				h.until = never
			}
			s.holds = append(s.holds, h)
			byClient[e.client] = h
			if h.token != 0 {
				byToken[[2]int64{int64(e.client), h.token}] = h
			}
		case "rel":
			if h := holdOf(e); h != nil {
				h.rel = e
				if e.known && e.ok && h.freed == nil {
					h.freed = e
				}
				h.until = min(h.until, e.call)
				if !e.ok {
					s.lost++
				}
			}
		case "leave":
			// An inner unlock: the hold stays until the outer one.
			if h := holdOf(e); h != nil && e.known && !e.ok {
				// The hold was lost (ErrNotHeld). The client watches only
				// the first hold's Done: this may be the only word of the
				// loss of a hold the re-entry took.
				h.until = min(h.until, e.call)
				h.lost = true
			} else if h != nil && (h.token == e.token || h.told != 0 && h.told == e.token) {
				if h.depth--; h.depth <= 0 || h.unsure {
					// It may have released the hold (a re-entry that
					// was a new hold).
					h.until = min(h.until, e.call)
				}
				op := "rel"
				if !e.known {
					op = "rel?"
				}
				h.inner = append(h.inner, porcupine.Operation{ClientId: e.client, Input: input(op, e, h),
					Call: e.call, Output: int64(0), Return: e.ret})
				if h.depth == 0 && e.known && e.ok && !h.unsure {
					h.freed = e // a hold a re-entry took anew, given back
				}
			}
		case "read", "write":
			s.regOps = append(s.regOps, regOp(e))
		case "lost":
			if h := holdOf(e); h != nil {
				if h.relCall == 0 || e.call < h.relCall {
					s.told++ // Done closed before any unlock: a loss
					h.lost = true
				}
				h.until = min(h.until, e.call)
			}
		case "paused", "killed":
			stops = append(stops, e)
		case "renewed":
			renewals[e.client] = append(renewals[e.client], e.call)
		case "evicted":
			windows = append(windows, [2]int64{e.call, e.ret})
		}
	}
	// A hold whose client was killed ends then (or, acquired between the
	// note and the signal, at its acquisition's reply at the latest); one
	// whose client was paused is valid at most a lease (less the margin)
	// after the last renewal sent before the pause (or the acquisition).
	for _, e := range stops {
		for _, h := range s.holds {
			if h.client != e.client || h.until <= e.call {
				continue
			}
			if e.kind == "killed" {
				h.until = min(h.until, max(e.call, h.from))
				continue
			}
			if h.call > e.call {
				continue
			}
			last := h.call
			for _, r := range renewals[e.client] {
				if r >= h.call && r <= e.call {
					last = max(last, r)
				}
			}
			h.until = min(h.until, last+int64(lease-margin))
		}
	}
	// A lost hold (Done closed, or the unlock did not release it) was valid
	// at most a lease (less the margin) after the last renewal of its
	// chain: its client's "lost" line comes later, by its goroutine's
	// wake-up, perhaps after the unlock was sent.
	for c := range renewals {
		slices.Sort(renewals[c])
	}
	for _, h := range s.holds {
		if !h.lost && (h.rel == nil || h.rel.ok) {
			continue // not lost, or released: its chain held
		}
		last := h.call
		for _, r := range renewals[h.client] {
			if r < h.call {
				continue
			}
			if r > last+int64(lease-margin) {
				break
			}
			last = r
		}
		h.until = min(h.until, last+int64(lease-margin))
	}
	// A key that carries holds evicted in a window (see evictBurst) ended,
	// at some time in it, every hold the server had then: as after a
	// restart without persistence, its holder is told only at its next
	// renewal or unlock, and the next holder's token is the higher (root
	// package doc, "Failure modes"). Such a hold is valid only until the
	// window opened, and the model may end it anywhere in the window.
	for _, w := range windows {
		for _, h := range s.holds {
			end := h.expRet
			if watchdog {
				end = never
			}
			// Released, or found gone: an eviction after that did not
			// end it. Not a fixed-lease hold whose unlock failed once
			// its lease from the acquisition had run out: the client
			// may have counted it lost by itself, at its deadline, and
			// returned ErrNotHeld without I/O, the hold still on the
			// server (re-entered after the deadline, which began a
			// lease of its own that the inner unlock gave back, so
			// that the outer unlock found only the lost one). An
			// eviction after that unlock may be what ended it
			// (TestSoakCheckerEvictedAfterUnlockFoundNothing). One that
			// failed while the lease still ran did reach the server,
			// which found it gone (see sure, below).
			if r := h.rel; r != nil && r.known && (r.ok || watchdog || r.ret < h.call+int64(lease-margin)) {
				end = min(end, r.ret)
			}
			if h.freed != nil {
				end = min(end, h.freed.ret)
			}
			if h.call >= w[1] || end <= w[0] {
				continue
			}
			// A hold its outer unlock released was on the server until
			// then, whole: an eviction did not end it. (Had one ended
			// it, a re-entry after it would have taken it anew, and
			// the inner unlock given that back: the outer unlock would
			// have found nothing.)
			if h.freed != nil {
				continue
			}
			if h.until > w[0] {
				s.evicted++ // valid, or so its holder believed, into the window
			}
			h.until = min(h.until, max(w[0], h.from))
			if watchdog {
				// Its expiry (below) may come at any time after it was
				// valid: from the window on, or its acquisition.
				h.evictFrom = min(h.evictFrom, max(w[0], h.call))
				continue
			}
			// The eviction ended the hold while it was there, if at all:
			// not before its acquisition was sent, nor after it ended.
			// Surely, if the server found it gone at the outer unlock
			// while its lease still ran (its client could not yet have
			// found it gone by itself). Not a multilock's: the unlock
			// found a member gone, which a re-entry may have taken
			// afresh while the others kept the group (package multilock,
			// "Leases and the lost signal").
			sure := !s.partial && h.rel != nil && h.rel.known && !h.rel.ok && h.rel.ret < h.call+int64(lease-margin)
			h.evicted = append(h.evicted, evictWindow{max(w[0], h.call), min(w[1], end), sure})
			// A re-entry may have taken a new hold after the eviction
			// ended the first (a plain hold's Token found it gone; the
			// re-entry queued behind another's hold and was handed the
			// lock): the window may end that one too, as the eviction
			// goes on, while the first hold needs the expiry above.
			for _, at := range h.newAt {
				if from := max(w[0], at); from < min(w[1], end) {
					h.evicted = append(h.evicted, evictWindow{from, min(w[1], end), false})
				}
			}
		}
	}
	// A renewed hold is on the server a lease after its acquisition at
	// least (see the re-entry above), unless an eviction ended it, as
	// early as the window opened: a re-entry after that whose token was
	// unknown may have taken a new hold, which needs an expiry of its own
	// (an eviction in the same window may end it too, so that its inner
	// unlock finds nothing).
	for _, h := range s.holds {
		if watchdog && h.blindEnter > h.evictFrom {
			if !h.unsure {
				h.unsure = true
				h.optCall, h.optRet = h.evictFrom, never
			}
			h.optCall = min(h.optCall, h.evictFrom)
		}
	}
	for _, p := range pending {
		if p.kind != "rel?" {
			p.ret = never
			s.regOps = append(s.regOps, regOp(p))
		}
	}
	slices.SortFunc(s.holds, func(a, b *soakHold) int { return int(a.from - b.from) })
	return s
}

func (s *soakHolds) nextID() int {
	id := len(s.holds) + 1
	if s.read {
		id = -id // distinct from the write side's
	}
	return id
}

// valid reports whether h was lease-valid at some time.
func (h *soakHold) valid() bool { return h.until > h.from }

// exclusiveOverlaps counts, and reports through r, the lease-valid holds
// of different clients that overlap. A hold never lease-valid (its lease,
// or an eviction, ended it before its acquisition returned) overlaps
// nothing.
func (s *soakHolds) exclusiveOverlaps(group string, r *soakReport) int {
	n := 0
	hs := s.holds
	for i := 1; i < len(hs); i++ {
		for j := i - 1; j >= 0 && j >= i-8; j-- {
			if hs[j].client != hs[i].client && hs[j].until > hs[i].from && hs[i].valid() {
				if n++; n > 10 {
					continue
				}
				r.fail("%s: client %d's hold (token %d) valid until %s, client %d acquired (token %d) %v before",
					group, hs[j].client, hs[j].token, time.Unix(0, hs[j].until).Format("15:04:05.000"),
					hs[i].client, hs[i].token, time.Duration(hs[j].until-hs[i].from))
			}
		}
	}
	if n > 10 {
		r.fail("%s: lease-valid holds overlapped %d more times", group, n-10)
	}
	return n
}

// lockOps returns the holds' history for a lock model: acquisitions,
// re-entries, inner and outer unlocks, and the expiries the server may
// have made.
func (s *soakHolds) lockOps() []porcupine.Operation {
	var ops []porcupine.Operation
	for _, h := range s.holds {
		in := func(op string, n int64) lockInput {
			return lockInput{op: op, client: h.client, token: h.token, hold: h.id, read: s.read, n: n}
		}
		op := func(input lockInput, call, ret int64) porcupine.Operation {
			return porcupine.Operation{ClientId: h.client, Input: input, Call: call, Output: int64(0), Return: ret}
		}
		first := len(ops)
		ops = append(ops, porcupine.Operation{ClientId: h.client, Input: in("acq", h.n), Call: h.call, Output: h.token, Return: h.from})
		ops = append(ops, h.inner...)
		if h.rel != nil && h.rel.known && h.rel.ok {
			ops = append(ops, op(in("rel", h.rel.value), h.rel.call, h.rel.ret))
		} else if h.rel != nil && !h.rel.known {
			// Its outcome was not known when it returned (its ctx
			// ended): it may go on in the background and land later
			// (root package doc, "Contexts and deadlines"). Its op ends
			// at its return all the same: the model may apply it
			// anywhere before, which frees the hold no later than a late
			// landing would, and nothing after an unlock needs the hold
			// it gave back.
			ops = append(ops, op(in("rel?", h.rel.value), h.rel.call, h.rel.ret))
		} else if h.rel != nil && s.partial {
			// Found lost, and what was left of it given back.
			ops = append(ops, op(in("exp?", 0), h.rel.call, h.rel.ret))
		} else if h.rel == nil && h.relCall != 0 {
			// Killed while unlocking.
			ops = append(ops, op(in("rel?", h.relN), h.relCall, never))
		}
		// Every hold expires in the end, if its unlocks did not release
		// it. For one they did, surely and whole, the model's expiry can
		// only come after its outer unlock, a no-op: left out, it costs
		// the search nothing.
		clean := h.freed != nil && !h.unsure && !h.lost && len(h.evicted) == 0 &&
			!slices.ContainsFunc(h.inner, func(op porcupine.Operation) bool { return op.Input.(lockInput).op == "rel?" })
		if clean {
			continue
		}
		// An expiry sent before the acquisition's reply (a lease shorter
		// than the acquisition took, an eviction window open while it
		// ran) could be placed before the acquisition: a no-op, after
		// which the hold is kept for good. The server cannot do that (an
		// expiry ends the hold after the script that took it), and the
		// search paid for it: a dead branch for each such hold, and for
		// the holds of an eviction window, every combination of them
		// (TestSoakCheckerReadHoldsEvictedWhileTaken). Marked early, the
		// model places it after the acquisition (powerModel); one that
		// may not have come loses nothing there, as it may keep the
		// hold. Not a sure eviction's when more than one window counts
		// as sure for the hold: one of them ended it, and the others may
		// have come before it was taken, as that branch allowed. Nor an
		// expiry that may not have come whose window closed before the
		// acquisition returned: the eviction may have come and gone
		// while the acquisition waited out another's hold, before the
		// server granted this one, and the model must then place it
		// before the acquisition, which it may place only after the
		// window (TestSoakCheckerGrantedAfterEvictionWhileWaiting). One
		// whose window closed later loses nothing: the acquisition took
		// effect by its reply, and the expiry fits just after it.
		early := 0
		expiry := func(kind string, call, ret int64, after bool) {
			input := in(kind, 0)
			if after && call < h.from && (kind == "exp" || ret >= h.from) {
				input.early = 1
				early++
			}
			ops = append(ops, op(input, call, ret))
		}
		if s.watchdog && h.until < never {
			// A renewed hold expired on the server at some time after
			// its holder stopped believing in it (or an eviction began).
			expiry("exp", min(h.until, h.evictFrom), never, true)
		} else if !s.watchdog {
			// The server expired the hold a lease after it ran the
			// acquisition (or last re-entry), between call and reply.
			expiry("exp", h.expCall, h.expRet, true)
		}
		if h.unsure {
			// The first hold may have expired before the re-entry took
			// a new one, whose expiry is the one above.
			expiry("exp?", h.optCall, h.optRet, true)
		}
		sure := 0
		for _, w := range h.evicted {
			if w.sure {
				sure++
			}
		}
		for _, w := range h.evicted {
			kind := "exp?"
			if w.sure {
				kind = "exp"
			}
			expiry(kind, w.from, w.to, !w.sure || sure == 1)
		}
		acq := ops[first].Input.(lockInput)
		acq.early = early
		ops[first].Input = acq
	}
	return ops
}

// checkSoakGroup is checkExclusiveGroup for the soak's exclusive groups by
// name: the watchdog group's holds are renewed, the multilock's partial.
func checkSoakGroup(group string, events []soakEvent, lease time.Duration, value, writes int64) soakReport {
	return checkExclusiveGroup(group, holdOpts{watchdog: group == "watchdog", partial: group == "multilock"}, events, lease, value, writes)
}

// checkExclusiveGroup checks the events of an exclusive lock's group
// (mutex, fairlock, the watchdog mutex, multilock All), whose holds are as
// o says, given its register's final value and accepted writes: no two
// lease-valid holds of different clients overlap; no fenced update is
// lost; the lock history is linearizable for an owner-aware, reentrant,
// fenced mutex, and the register history for a fenced register.
func checkExclusiveGroup(group string, o holdOpts, events []soakEvent, lease time.Duration, value, writes int64) soakReport {
	var r soakReport
	s := buildHolds(events, lease, o)
	r.overlaps = s.exclusiveOverlaps(group, &r)
	// No fenced update lost: each accepted write added one to the value.
	if value != writes {
		r.fail("%s: register value %d after %d accepted writes: %d fenced updates lost", group, value, writes, writes-value)
	}
	lockResult := porcupine.CheckOperationsTimeout(mutexModel, s.lockOps(), checkTimeout())
	regResult := porcupine.CheckOperationsTimeout(registerModel.ToModel(), s.regOps, checkTimeout())
	r.summary = fmt.Sprintf("%s: %d holds (%d re-entered, %d lost, %d acquisitions failed, %d in an eviction), %d fenced writes accepted, value %d; overlaps %d, lost updates %d; porcupine: mutex %s, register %s",
		group, s.acquired, s.reenter, s.lost, s.failed, s.evicted, writes, value, r.overlaps, writes-value, lockResult, regResult)
	if s.watchdog {
		r.summary += fmt.Sprintf("; Done closed before the unlock %d times", s.told)
	}
	if s.acquired == 0 {
		r.fail("%s: no hold acquired", group)
	}
	r.verdict(lockResult, group+": the lock history", "a fenced mutex")
	r.verdict(regResult, group+": the register history", "a fenced register")
	return r
}

// soakCapacity is the capacity of the soak's semaphore.
const soakCapacity = 3

// checkSemaphoreGroup checks the events of a semaphore's group: no more
// than capacity permits held by lease-valid holders at once, and the
// history of acquisitions, further acquisitions by an owner, releases and
// expiries linearizable for a semaphore of acquired permits (Hazelcast's
// model, with leases).
func checkSemaphoreGroup(events []soakEvent, lease time.Duration, capacity int64) soakReport {
	var r soakReport
	s := buildHolds(events, lease, holdOpts{})
	type edge struct {
		at int64
		n  int64
	}
	var edges []edge
	add := func(from, until, n int64) {
		if until > from {
			edges = append(edges, edge{from, n}, edge{until, -n})
		}
	}
	var permits int64
	for _, h := range s.holds {
		add(h.from, h.until, h.n)
		permits += h.n
		// Permits an owner acquired again: valid from that reply until
		// given back, or the hold's end.
		var more []porcupine.Operation
		for _, op := range h.inner {
			in := op.Input.(lockInput)
			switch in.op {
			case "enter":
				more = append(more, op)
				permits += in.n
			case "rel", "rel?":
				if len(more) > 0 {
					e := more[len(more)-1]
					more = more[:len(more)-1]
					add(e.Return, min(op.Call, h.until), e.Input.(lockInput).n)
				}
			}
		}
		for _, e := range more {
			add(e.Return, h.until, e.Input.(lockInput).n)
		}
	}
	// Ends before starts at the same instant: permits given back when
	// others are acquired are not held twice.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.n - b.n)
	})
	var held, peak int64
	for _, e := range edges {
		was := held
		held += e.n
		if held > capacity && was <= capacity {
			r.overlaps++
			if r.overlaps <= 10 {
				r.fail("semaphore: %d lease-valid permits held at %s, above the capacity %d", held, time.Unix(0, e.at).Format("15:04:05.000000"), capacity)
			}
		}
		peak = max(peak, held)
	}
	if r.overlaps > 10 {
		r.fail("semaphore: above the capacity %d more times", r.overlaps-10)
	}
	var full atomic.Bool
	result := porcupine.CheckOperationsTimeout(semaphoreModel(capacity, &full), s.lockOps(), checkTimeout())
	if full.Load() {
		r.fail("semaphore: more than %d holds at once, the model's limit: the checker's, to raise", maxHolds)
	} else {
		r.verdict(result, "semaphore: the history", fmt.Sprintf("a semaphore of %d permits", capacity))
	}
	if s.acquired == 0 {
		r.fail("semaphore: no permit acquired")
	}
	r.summary = fmt.Sprintf("semaphore (capacity %d): %d acquisitions of %d permits (%d acquired again by their owner, %d lost, %d failed, %d in an eviction); at most %d lease-valid permits held at once, above the capacity %d times; porcupine: semaphore %s",
		capacity, s.acquired, permits, s.reenter, s.lost, s.failed, s.evicted, peak, r.overlaps, result)
	return r
}

// lockInput is an operation of a lock or semaphore history.
type lockInput struct {
	op     string // acq, enter (re-entry, or more permits), rel (one unlock), rel? (outcome unknown), exp, exp? (perhaps)
	client int
	token  int64 // of the hold; 0: unknown (Token failed), or none
	tells  bool  // enter: token is the one a re-entry told for a hold whose own was unknown
	hold   int   // the checker's hold the operation belongs to
	read   bool  // a read-write lock's read side
	n      int64 // semaphore: permits
	// early: on an acquisition, how many of its hold's expiries were sent
	// before its reply that the model places after it; on an expiry, 1 if
	// it is one of them (see lockOps).
	early int
}

type mutexState struct {
	holder int // -1: free
	count  int // the holder's locks not yet unlocked
	token  int64
	hold   int // the checker's hold held
}

// mutexModel: an owner-aware, reentrant mutex whose acquisitions hand out
// increasing tokens. A re-entry keeps the hold and its token, and the hold
// is released by as many unlocks as it was locked; an expiry releases it
// whatever the count. A release or expiry of a hold the owner no longer
// has is a no-op (it was released or expired already).
var mutexModel = powerModel(mutexState{holder: -1}, mutexState.hash,
	func(s mutexState, in lockInput, token int64) []mutexState { return mutexStep(s, in, token, true) })

// mutexStep is mutexModel's step; free says whether the lock may be taken
// anew (a read-write lock's write side: no read hold).
func mutexStep(s mutexState, in lockInput, token int64, free bool) []mutexState {
	// An operation is matched to its hold, not just its client, nor
	// a token that may be unknown.
	mine := s.holder == in.client && s.hold == in.hold
	freed := mutexState{holder: -1, token: s.token}
	unlocked := freed // one unlock of the holder's
	if s.count > 1 {
		unlocked = mutexState{holder: s.holder, count: s.count - 1, token: s.token, hold: s.hold}
	}
	switch in.op {
	case "acq":
		if token == 0 {
			// Token() failed: the hold's token is unknown.
			if s.holder != -1 || !free {
				return nil
			}
			return []mutexState{mutexState{holder: in.client, count: 1, token: s.token, hold: in.hold}}
		}
		if s.holder != -1 || !free || token <= s.token {
			return nil
		}
		return []mutexState{mutexState{holder: in.client, count: 1, token: token, hold: in.hold}}
	case "enter":
		// A re-entry keeps the hold and its token. With the token
		// unknown (Token failed) it may also have been a new hold.
		// One that tells the token of a hold whose own was unknown
		// tells that hold's, newer than any before it, or took a new
		// hold.
		var next []mutexState
		switch {
		case mine && !in.tells && (in.token == 0 || in.token == s.token):
			next = append(next, mutexState{holder: s.holder, count: s.count + 1, token: s.token, hold: s.hold})
		case mine && in.tells && in.token > s.token:
			next = append(next, mutexState{holder: s.holder, count: s.count + 1, token: in.token, hold: s.hold})
		}
		if (in.token == 0 || in.tells && in.token > s.token) && s.holder == -1 && free {
			next = append(next, mutexState{holder: in.client, count: 1, token: max(s.token, in.token), hold: in.hold})
		}
		return next
	case "rel":
		if !mine {
			return nil
		}
		return []mutexState{unlocked}
	case "rel?":
		if !mine {
			return []mutexState{s}
		}
		return []mutexState{s, unlocked}
	case "exp":
		if !mine {
			return []mutexState{s}
		}
		return []mutexState{freed}
	case "exp?":
		if !mine {
			return []mutexState{s}
		}
		return []mutexState{s, freed}
	}
	return nil
}

type regInput struct {
	write bool
	token int64
	value int64 // write: the value written
}

type regOutput struct {
	ok, known bool
	value     int64 // read: the value read
}

type regState struct{ value, fence int64 }

// registerModel: the fenced register (see register): an operation with a
// token below the highest seen is refused; an accepted one raises the
// fence to its token. An operation whose outcome is unknown may have been
// applied or not.
var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		if in.token < s.fence {
			if out.known && out.ok {
				return nil
			}
			return []any{s}
		}
		next := regState{value: s.value, fence: in.token}
		if in.write {
			next.value = in.value
		} else if out.known && out.value != s.value {
			return nil
		}
		if !out.known {
			return []any{s, next}
		}
		if !out.ok {
			return nil
		}
		return []any{next}
	},
}

// holdCounts is a model's set of holds, each with a count (re-entries of
// a read hold, or a semaphore owner's permits), sorted by hold, so that
// equal sets are equal states. Live holds in a state are bounded by the
// clients (each has one at a time, and those of killed clients, or whose
// release was not known, last until they expire); a set that outgrows it
// marks itself full, which no step accepts: a violation the checker
// reports as the model's limit, not the lock's.
type holdCounts struct {
	n    int
	full bool
	e    [maxHolds]holdCount
}

type holdCount struct {
	hold  int32
	count int32
}

const maxHolds = 16

// get returns the count of hold (0: not held).
func (hc holdCounts) get(hold int) int64 {
	for _, e := range hc.e[:hc.n] {
		if e.hold == int32(hold) {
			return int64(e.count)
		}
	}
	return 0
}

// total returns the sum of the counts.
func (hc holdCounts) total() int64 {
	var t int64
	for _, e := range hc.e[:hc.n] {
		t += int64(e.count)
	}
	return t
}

// add returns the set with hold's count changed by d (removed at 0).
func (hc holdCounts) add(hold int, d int64) holdCounts {
	for i, e := range hc.e[:hc.n] {
		if e.hold == int32(hold) {
			if hc.e[i].count += int32(d); hc.e[i].count <= 0 {
				return hc.drop(hold)
			}
			return hc
		}
	}
	if d <= 0 {
		return hc
	}
	if hc.n == maxHolds {
		hc.full = true
		return hc
	}
	i := hc.n
	for i > 0 && hc.e[i-1].hold > int32(hold) {
		hc.e[i] = hc.e[i-1]
		i--
	}
	hc.e[i] = holdCount{int32(hold), int32(d)}
	hc.n++
	return hc
}

// drop returns the set without hold.
func (hc holdCounts) drop(hold int) holdCounts {
	for i, e := range hc.e[:hc.n] {
		if e.hold == int32(hold) {
			copy(hc.e[i:], hc.e[i+1:hc.n])
			hc.n--
			hc.e[hc.n] = holdCount{}
			return hc
		}
	}
	return hc
}

func (hc holdCounts) hash() uint64 {
	h := uint64(hc.n) * 0x9e3779b97f4a7c15
	for _, e := range hc.e[:hc.n] {
		h = (h ^ uint64(uint32(e.hold))<<32 ^ uint64(uint32(e.count))) * 0x100000001b3
	}
	return h
}

func (s mutexState) hash() uint64 {
	return (uint64(s.holder+1)*0x9e3779b97f4a7c15 ^ uint64(s.count)<<48 ^ uint64(s.token) ^ uint64(s.hold)<<24) * 0x100000001b3
}

// semaphoreModel: a counting semaphore of acquired permits (Hazelcast's
// model for its semaphore), with owners and leases, as package semaphore
// documents it. Each owner's hold counts its permits. An acquisition
// takes n permits only if no more than capacity are then held; an owner's
// further acquisition adds to its hold (or, its hold having expired, makes
// a new one). A release of n gives back n of the owner's permits, and
// succeeds only if it holds them ("releasing more than is held is an
// error ... and releases nothing": a failed release is no operation here);
// one whose outcome is unknown may have done so or not. An expiry (the
// lease ran out, or an eviction took the state) gives back all of the
// hold's permits.
func semaphoreModel(capacity int64, full *atomic.Bool) porcupine.Model {
	return powerModel(holdCounts{}, holdCounts.hash, func(s holdCounts, in lockInput, _ int64) []holdCounts {
		if s.full {
			full.Store(true)
			return nil
		}
		held := s.get(in.hold)
		switch in.op {
		case "acq", "enter":
			if in.op == "acq" && held > 0 || s.total()+in.n > capacity {
				return nil
			}
			return []holdCounts{s.add(in.hold, in.n)}
		case "rel":
			if held < in.n {
				return nil
			}
			return []holdCounts{s.add(in.hold, -in.n)}
		case "rel?":
			if held < in.n {
				return []holdCounts{s}
			}
			return []holdCounts{s, s.add(in.hold, -in.n)}
		case "exp":
			return []holdCounts{s.drop(in.hold)}
		case "exp?":
			if held == 0 {
				return []holdCounts{s}
			}
			return []holdCounts{s, s.drop(in.hold)}
		}
		return nil
	})
}

// The read side's events of a read-write lock's clients, by the kinds
// buildHolds knows them by.
var readKinds = map[string]string{"racq": "acq", "renter": "enter", "rleave": "leave", "rrel?": "rel?", "rrel": "rel", "rfail": "fail"}

// checkRWGroup checks the events of a read-write lock's group, whose
// clients take write holds (as an exclusive lock's clients do, with a
// fenced register) and read holds (racq, renter, rleave, rrel?, rrel,
// rfail): no lease-valid write hold overlaps a lease-valid hold of
// another client, read or write, while read holds may overlap each other;
// no fenced update is lost; the lock history is linearizable for a
// reentrant read-write lock whose write holds hand out increasing tokens
// (rwModel), the register's for a fenced register.
func checkRWGroup(events []soakEvent, lease time.Duration, value, writes int64) soakReport {
	const group = "rwlock"
	var r soakReport
	ws, rs := buildRWHolds(events, lease)
	r.overlaps = ws.exclusiveOverlaps(group, &r)
	var cross int
	for _, w := range ws.holds {
		if !w.valid() {
			continue
		}
		for _, h := range rs.holds {
			if h.client == w.client || !h.valid() || h.from >= w.until || w.from >= h.until {
				continue
			}
			if cross++; cross <= 10 {
				r.fail("%s: client %d's write hold (token %d) valid %s-%s overlaps client %d's read hold valid %s-%s",
					group, w.client, w.token, time.Unix(0, w.from).Format("15:04:05.000"), time.Unix(0, w.until).Format("15:04:05.000"),
					h.client, time.Unix(0, h.from).Format("15:04:05.000"), time.Unix(0, h.until).Format("15:04:05.000"))
			}
		}
	}
	if cross > 10 {
		r.fail("%s: a write hold overlapped a read hold %d more times", group, cross-10)
	}
	r.overlaps += cross
	// How much the readers shared: the most lease-valid read holds at once.
	type edge struct {
		at int64
		d  int
	}
	var edges []edge
	for _, h := range rs.holds {
		if h.valid() {
			edges = append(edges, edge{h.from, 1}, edge{h.until, -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.d - b.d
	})
	readers, most, shared := 0, 0, 0
	for _, e := range edges {
		if readers += e.d; e.d > 0 && readers > 1 {
			shared++
		}
		most = max(most, readers)
	}
	if value != writes {
		r.fail("%s: register value %d after %d accepted writes: %d fenced updates lost", group, value, writes, writes-value)
	}
	var full atomic.Bool
	lockResult := porcupine.CheckOperationsTimeout(rwModel(&full), append(ws.lockOps(), rs.lockOps()...), checkTimeout())
	regResult := porcupine.CheckOperationsTimeout(registerModel.ToModel(), ws.regOps, checkTimeout())
	r.summary = fmt.Sprintf("%s: %d write holds (%d re-entered, %d lost, %d failed, %d in an eviction), %d read holds (%d re-entered, %d lost, %d failed, %d in an eviction; %d taken while another reader held, at most %d at once), %d fenced writes accepted, value %d; overlaps %d, lost updates %d; porcupine: rwlock %s, register %s",
		group, ws.acquired, ws.reenter, ws.lost, ws.failed, ws.evicted, rs.acquired, rs.reenter, rs.lost, rs.failed, rs.evicted, shared, most,
		writes, value, r.overlaps, writes-value, lockResult, regResult)
	if ws.acquired == 0 || rs.acquired == 0 {
		r.fail("%s: %d write holds, %d read holds: want both", group, ws.acquired, rs.acquired)
	}
	if full.Load() {
		r.fail("%s: more than %d read holds at once, the model's limit: the checker's, to raise", group, maxHolds)
	} else {
		r.verdict(lockResult, group+": the lock history", "a read-write lock")
	}
	r.verdict(regResult, group+": the register history", "a fenced register")
	return r
}

// buildRWHolds rebuilds a read-write lock's write holds and read holds
// from its group's events; the parent's notes bound both.
func buildRWHolds(events []soakEvent, lease time.Duration) (ws, rs *soakHolds) {
	var wev, rev []soakEvent
	for _, e := range events {
		if k, ok := readKinds[e.kind]; ok {
			e.kind = k
			rev = append(rev, e)
			continue
		}
		switch e.kind {
		case "paused", "killed", "evicted":
			rev = append(rev, e)
		}
		wev = append(wev, e)
	}
	return buildHolds(wev, lease, holdOpts{}), buildHolds(rev, lease, holdOpts{read: true})
}

type rwState struct {
	w       mutexState
	readers holdCounts // read holds, each with its locks not yet unlocked
}

// rwModel: a reentrant read-write lock, as package rwlock documents it.
// Its write side is mutexModel's (tokens increasing, re-entries counted),
// taken anew only while no read hold is held; a read hold is taken only
// while no write hold is held, by any number of owners at once, and
// counts its re-entries. A release or expiry of a read hold ends it as for
// the write side. Read holds have no token to check ("a read hold's token
// is not exported").
func rwModel(full *atomic.Bool) porcupine.Model {
	return powerModel(rwState{w: mutexState{holder: -1}},
		func(s rwState) uint64 { return s.w.hash() ^ s.readers.hash() },
		func(s rwState, in lockInput, token int64) []rwState {
			if s.readers.full {
				full.Store(true)
				return nil
			}
			if !in.read {
				var next []rwState
				for _, w := range mutexStep(s.w, in, token, s.readers.n == 0) {
					next = append(next, rwState{w: w, readers: s.readers})
				}
				return next
			}
			held := s.readers.get(in.hold)
			with := func(r holdCounts) rwState { return rwState{w: s.w, readers: r} }
			switch in.op {
			case "acq", "enter":
				// A re-entry keeps the hold; one whose hold ended meanwhile
				// takes a new one, as an acquisition does.
				if held > 0 && in.op == "enter" {
					return []rwState{with(s.readers.add(in.hold, 1))}
				}
				if held > 0 || s.w.holder != -1 {
					return nil
				}
				return []rwState{with(s.readers.add(in.hold, 1))}
			case "rel":
				if held == 0 {
					return nil
				}
				return []rwState{with(s.readers.add(in.hold, -1))}
			case "rel?":
				if held == 0 {
					return []rwState{s}
				}
				return []rwState{s, with(s.readers.add(in.hold, -1))}
			case "exp":
				return []rwState{with(s.readers.drop(in.hold))}
			case "exp?":
				if held == 0 {
					return []rwState{s}
				}
				return []rwState{s, with(s.readers.drop(in.hold))}
			}
			return nil
		})
}

// powerModel is a porcupine model of a nondeterministic step (several
// next states, or none: illegal), by the power set construction, as
// porcupine's NondeterministicModel does, but with a set kept deduplicated
// and ordered by hash, so that a step over a set of n states costs n steps
// and a sort, not n² comparisons: an unknown outcome (an unlock whose reply
// was lost, an expiry that may have come) doubles the states a hold can be
// in, and a history under faults has several at once. An expiry marked
// early (see lockOps) is illegal until its hold's acquisition is placed.
func powerModel[S comparable](init S, hash func(S) uint64, step func(s S, in lockInput, token int64) []S) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return newStateSet([]S{init}, hash) },
		Step: func(state, input, output any) (bool, any) {
			in, token := input.(lockInput), output.(int64)
			set := state.(*stateSet[S])
			started := set.started
			if in.early > 0 {
				// An expiry sent before its hold's acquisition
				// returned comes after the acquisition (see lockOps).
				var ok bool
				if started, ok = set.started.take(in); !ok {
					return false, nil
				}
			}
			var next []S
			for _, s := range set.states {
				next = append(next, step(s, in, token)...)
			}
			if len(next) == 0 {
				return false, nil
			}
			n := newStateSet(next, hash)
			n.started = started
			return true, n
		},
		Equal: func(a, b any) bool { return a.(*stateSet[S]).equal(b.(*stateSet[S])) },
		Hash:  func(state any) uint64 { return state.(*stateSet[S]).sum },
		DescribeState: func(state any) string {
			return fmt.Sprintf("%+v", state.(*stateSet[S]).states)
		},
	}
}

// stateSet is a set of model states, deduplicated, ordered by hash.
type stateSet[S comparable] struct {
	states []S
	hashes []uint64
	sum    uint64 // of the hashes
	// started: the holds acquired whose early expiries (see lockOps) have
	// not all been placed. It is the same for every state of the set,
	// and follows from the operations placed, which porcupine's cache
	// keys on with the state: it needs no part in the state's equality.
	started earlyCounts
}

// earlyCounts is a set of holds, each with the expiries still to place
// that were sent before its acquisition returned; never changed in place.
type earlyCounts []holdCount

// take returns the set after placing in: its acquisition adds its hold
// with its early expiries; an early expiry, of a hold in the set, takes
// one off (ok false: its hold's acquisition is not placed yet).
func (ec earlyCounts) take(in lockInput) (earlyCounts, bool) {
	i := slices.IndexFunc(ec, func(e holdCount) bool { return e.hold == int32(in.hold) })
	if in.op == "acq" {
		return append(slices.Clip(ec), holdCount{int32(in.hold), int32(in.early)}), true
	}
	if i < 0 {
		return ec, false
	}
	if ec[i].count == 1 {
		return slices.Delete(slices.Clone(ec), i, i+1), true
	}
	ec = slices.Clone(ec)
	ec[i].count--
	return ec, true
}

func newStateSet[S comparable](states []S, hash func(S) uint64) *stateSet[S] {
	if len(states) == 1 {
		h := hash(states[0])
		return &stateSet[S]{states: states, hashes: []uint64{h}, sum: h}
	}
	order := make([]int, len(states))
	hashes := make([]uint64, len(states))
	for i, s := range states {
		order[i], hashes[i] = i, hash(s)
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case hashes[a] < hashes[b]:
			return -1
		case hashes[a] > hashes[b]:
			return 1
		}
		return 0
	})
	set := &stateSet[S]{states: make([]S, 0, len(states)), hashes: make([]uint64, 0, len(states))}
	for k, i := range order {
		// Equal states have equal hashes: a duplicate is in the run
		// of its hash already kept.
		dup := false
		for j := len(set.states) - 1; j >= 0 && set.hashes[j] == hashes[i] && !dup; j-- {
			dup = set.states[j] == states[i]
		}
		if !dup {
			set.states = append(set.states, states[order[k]])
			set.hashes = append(set.hashes, hashes[i])
			set.sum += hashes[i]
		}
	}
	return set
}

func (a *stateSet[S]) equal(b *stateSet[S]) bool {
	if len(a.states) != len(b.states) || a.sum != b.sum {
		return false
	}
	for i := range a.states {
		if a.hashes[i] != b.hashes[i] {
			return false
		}
		if a.states[i] != b.states[i] {
			// States whose hashes collide may be in either order.
			j := i
			for j > 0 && a.hashes[j-1] == a.hashes[i] {
				j--
			}
			found := false
			for ; j < len(b.states) && b.hashes[j] == a.hashes[i]; j++ {
				if b.states[j] == a.states[i] {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}
