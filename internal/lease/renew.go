package lease

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/observe"
)

// The one path of renewals: due leases are grouped by script (and by hash
// slot on a sharded backend), the groups put into bundles, and each bundle
// sent as one call (Eval for a single group, EvalBatch for several) at
// most MaxRenewing at a time; the replies reschedule or end the leases.

type groupKey struct {
	script       *backend.Script
	nkeys, nargs int
	slot         uint16
}

type group struct {
	groupKey
	leases []*Lease
}

// renew sends the renewals of due leases and reschedules them by the
// outcome.
func (s *Scheduler) renew(due []*Lease) {
	sharded := backend.IsSharded(s.b)
	groups := map[groupKey]*group{}
	var order []*group
	for _, l := range due {
		k := groupKey{script: l.spec.Renew, nkeys: len(l.spec.Keys), nargs: 3 + len(l.spec.Extra)}
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

// dispatch sends the bundles' renewals, at most MaxRenewing calls at a
// time. While it waits for a call to end, the leases still waiting are
// watched: one whose deadline passes is lost then, as the server expires
// its key, however long the calls in flight take.
func (s *Scheduler) dispatch(pending []bundle) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for len(pending) > 0 {
		earliest, ok := s.earliestDeadline(pending)
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
				s.send(bd)
			}()
		case <-timer.C:
			s.expire(pending)
		}
	}
}

// waitingLocked reports whether l still waits for the renewal it was
// taken off the queue for: not ended, nor rescheduled by a re-entry.
func (l *Lease) waitingLocked() bool { return l.state == active && l.index < 0 }

// earliestDeadline returns the earliest deadline among the leases of
// bundles still waiting, and false if none is.
func (s *Scheduler) earliestDeadline(bundles []bundle) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var earliest time.Time
	for _, bd := range bundles {
		for _, g := range bd {
			for _, l := range g.leases {
				if l.waitingLocked() && (earliest.IsZero() || l.deadline.Before(earliest)) {
					earliest = l.deadline
				}
			}
		}
	}
	return earliest, !earliest.IsZero()
}

// expire loses the leases of bundles whose deadline has passed before
// their renewal could be sent.
func (s *Scheduler) expire(bundles []bundle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, bd := range bundles {
		for _, g := range bd {
			for _, l := range g.leases {
				if l.waitingLocked() && !now.Before(l.deadline) {
					s.lapseLocked(l)
				}
			}
		}
	}
	s.idleLocked()
}

// part is one renewal call of a bundle: a group's leases still waiting.
type part struct {
	leases []*Lease
	call   backend.Call
}

// send sends the renewals of a bundle, as one Eval or one EvalBatch, and
// applies the replies.
func (s *Scheduler) send(bd bundle) {
	s.mu.Lock()
	now := time.Now()
	var (
		parts    []part
		earliest time.Time
	)
	for _, g := range bd {
		p, e := s.prepareLocked(g, now)
		if len(p.leases) == 0 {
			continue
		}
		parts = append(parts, p)
		if earliest.IsZero() || e.Before(earliest) {
			earliest = e
		}
	}
	if len(parts) == 0 {
		s.idleLocked()
		s.mu.Unlock()
		return
	}
	s.calls++
	checks := s.checks
	s.mu.Unlock()

	sent := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), earliest)
	results := s.call(ctx, parts)
	cancel()
	took := time.Since(sent)

	s.mu.Lock()
	defer s.mu.Unlock()
	o := observe.For(s.b)
	// A check came while the call was out: it may have run on the
	// server before the server lost its data (a restart, a failover), so
	// its leases are checked again rather than trusted.
	stale := s.checks != checks
	for i, p := range parts {
		gone := s.applyLocked(p.leases, results[i].Reply, results[i].Err, sent, stale)
		o.ReportRenewed(observe.Renewal{Leases: len(p.leases), Failed: results[i].Err != nil, Gone: gone, Took: took})
	}
	s.armLocked()
	s.idleLocked()
}

// call runs the calls of parts: through Eval for one, through EvalBatch
// for several (see bundle). It returns a result per part.
func (s *Scheduler) call(ctx context.Context, parts []part) []backend.Result {
	results := make([]backend.Result, len(parts))
	if len(parts) == 1 {
		c := parts[0].call
		results[0].Reply, results[0].Err = s.b.Eval(ctx, c.Script, c.Keys, c.Args...)
		return results
	}
	calls := make([]backend.Call, len(parts))
	for i, p := range parts {
		calls[i] = p.call
	}
	out, err := s.b.(backend.Batcher).EvalBatch(ctx, calls)
	if err == nil && len(out) != len(calls) {
		err = fmt.Errorf("%w: %d results for a batch of %d calls", dsync.ErrUnexpectedReply, len(out), len(calls))
	}
	if err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	return out
}

// prepareLocked returns the part of g still to renew, with the call's
// keys and args, and the earliest deadline among its leases. Leases that
// ended while the group waited for its turn are left out; those whose
// deadline passed meanwhile (the call's goroutine ran late, on a loaded
// machine) are lost now, as the tick or the dispatcher would have lost
// them: nothing else looks at a lease taken off the queue.
func (s *Scheduler) prepareLocked(g *group, now time.Time) (p part, earliest time.Time) {
	leases := make([]*Lease, 0, len(g.leases))
	for _, l := range g.leases {
		switch {
		case !l.waitingLocked():
		case now.Before(l.deadline):
			leases = append(leases, l)
		default:
			s.lapseLocked(l)
		}
	}
	if len(leases) == 0 {
		return part{}, time.Time{}
	}
	ks := make([]string, 0, len(leases)*g.nkeys)
	args := make([]any, 0, 2+len(leases)*g.nargs)
	args = append(args, g.nkeys, g.nargs)
	earliest = leases[0].deadline
	for _, l := range leases {
		ks = append(ks, l.spec.Keys...)
		ms := int64(0) // a fixed lease is only checked
		if !l.spec.Fixed {
			ms = l.spec.TTL.Milliseconds()
		}
		owner, id, _ := l.Args()
		args = append(args, owner, ms, id)
		args = append(args, l.spec.Extra...)
		if l.deadline.Before(earliest) {
			earliest = l.deadline
		}
	}
	return part{leases, backend.Call{Script: g.script, Keys: ks, Args: args}}, earliest
}

// applyLocked reschedules leases by the outcome of their renewal call,
// sent at sent, and returns how many the call found gone. With stale, a
// check came while the call was out (see Check): a lease the call kept is
// checked again at once.
func (s *Scheduler) applyLocked(leases []*Lease, reply any, err error, sent time.Time, stale bool) (gone int) {
	var results []int64
	if err == nil {
		results, err = backend.Ints(reply, len(leases))
	}
	f := renewalFailure{err: err, crossSlot: isCrossSlot(err), batch: len(leases)}
	now := time.Now()
	for i, l := range leases {
		if !l.waitingLocked() {
			continue // released, or re-acquired and rescheduled, meanwhile
		}
		if stale && !l.checking {
			l.checking, l.rechecks = true, 0
		}
		var queue bool
		if err == nil {
			var lost bool
			queue, lost = s.repliedLocked(l, results[i] == 1, sent, now, stale)
			if lost {
				gone++
			}
		} else {
			queue = s.failedLocked(l, &f, now, stale, i == 0)
		}
		if queue {
			heap.Push(&s.queue, l)
		}
	}
	return gone
}

// repliedLocked applies the server's reply to l's renewal, sent at sent:
// on reports that the hold was still on (and, unless l is fixed, now
// renewed). It reports whether l is to be queued again, and whether l was
// lost with the reply.
func (s *Scheduler) repliedLocked(l *Lease, on bool, sent, now time.Time, stale bool) (queue, lost bool) {
	switch {
	case on && l.spec.Fixed:
		// A fixed lease checked: it stays as it was, to expire at its
		// deadline.
		l.checking, l.next = false, l.deadline
	case on:
		// An Extend while the call was in flight may have moved the
		// deadline further than this renewal does: it stays.
		l.checking = false
		l.renewedLocked(sent, l.spec.TTL)
	case l.releasing > 0:
		// A final release got there first, which is not a loss; if the
		// release turns out partial, Settle reports the loss.
		l.gone = true
		return false, false
	default:
		s.loseLocked(l, "hold no longer on the server", nil)
		return false, true
	}
	if stale {
		l.checking, l.next = true, now
	}
	return true, false
}

// renewalFailure is what a failed renewal call tells each of its leases.
type renewalFailure struct {
	err       error
	crossSlot bool                  // refused for keys of several hash slots
	batch     int                   // leases in the call
	logged    map[*slog.Logger]bool // loggers told of crossSlot
}

// failedLocked applies f, the failure of l's renewal call, to l: a
// transient failure is retried (soon, while a check after a reconnection
// lasts); a closed backend or a call that can never succeed loses l. first
// says l is the first of its call, which logs a retry for the call. It
// reports whether l is to be queued again.
func (s *Scheduler) failedLocked(l *Lease, f *renewalFailure, now time.Time, stale, first bool) (queue bool) {
	closed := errors.Is(f.err, dsync.ErrClosed)
	transient := !closed && !f.crossSlot
	switch {
	case l.checking && transient && l.rechecks < maxRechecks:
		l.rechecks++
		l.next = l.noLaterThanDeadline(now.Add(recheckDelay)) // lost then, as a renewal's retries are
	case l.spec.Fixed && transient:
		// A check that kept failing is left; the next reconnection checks
		// again.
		l.checking, l.next = false, l.deadline
		if stale {
			l.checking, l.next = true, now
		}
	case closed:
		s.loseLocked(l, "backend closed", f.err)
		return false
	case f.crossSlot:
		// Retrying sends the same keys: the batch can never succeed.
		if log := l.spec.Logger; log != nil && !f.logged[log] {
			if f.logged == nil {
				f.logged = make(map[*slog.Logger]bool)
			}
			f.logged[log] = true
			log.Error("dsync: lease renewal refused: one call named keys of several Redis Cluster hash slots (CROSSSLOT); a backend over a cluster must implement backend.Sharded",
				"name", l.spec.Name, "backend", fmt.Sprintf("%T", s.b), "leases", f.batch, "error", f.err)
		}
		s.loseLocked(l, "renewal batch spans hash slots (CROSSSLOT)", f.err)
		return false
	default:
		if log := l.spec.Logger; log != nil && first {
			log.Debug("dsync: lease renewal failed; retrying", "name", l.spec.Name, "error", f.err)
		}
		l.retrying, l.checking = true, false
		l.next = l.noLaterThanDeadline(now.Add(max(min(l.spec.TTL/10, time.Second), 10*time.Millisecond)))
	}
	return true
}

// noLaterThanDeadline returns t, or l's deadline if that comes first.
func (l *Lease) noLaterThanDeadline(t time.Time) time.Time {
	if t.After(l.deadline) {
		return l.deadline
	}
	return t
}

// isCrossSlot reports whether err is a cluster's refusal of a call whose
// keys span hash slots.
func isCrossSlot(err error) bool {
	var se *backend.ServerError
	return errors.As(err, &se) && se.Prefix() == "CROSSSLOT"
}
