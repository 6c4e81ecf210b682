package multilock

import (
	"context"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/wait"
)

// gateFirst is the first step of a RedLock acquisition by an owner that
// holds none of the members, once a round of this lock found a member
// busy: it queues for the first member in
// canonical order (the gate every contender queues for) before it tries
// the others. A round that tried all of them at once would take the free
// ones from under the waiter just handed the gate, which then waits for
// them (see awaitMajority), and give them back at once, since it found
// the gate busy: each hand-off would cost the waiter round trips more. It
// returns the hold if it won; otherwise nothing is held, and the caller
// goes on with its rounds, knowing whether the wait for the gate timed
// out (the gate may be stuck held), or, if the gate's attempt failed, its
// result, for the first round to count as it would its own.
//
// While the gate's server answered the last attempt on it (gateReached),
// it queues for the gate at once, in one call, where a try bounded by the
// member timeout and then a wait would cost the server two. A server that
// fails the wait's first attempt (it refuses connections) ends the wait
// at once (wait.FailFast); one that stalls, or goes away during the wait,
// costs that acquisition the wait's bound (gateWait). Either way the next
// one tries first again.
func (l *Lock) gateFirst(ctx context.Context) (h *hold, timedOut bool, gate *result, err error) {
	g := l.order[0]
	start := time.Now()
	queued := l.gateReached.Load()
	waited := queued
	if !queued {
		mctx, cancel := context.WithTimeout(ctx, l.memberTimeout())
		ok, err := l.members[g].TryLockContext(mctx)
		if err != nil {
			down := ctx.Err() == nil && (mctx.Err() != nil || wait.Transient(err))
			cancel()
			r := result{down: down, err: err}
			if ctx.Err() != nil {
				// No round after ctx's end (see below).
				_, err := l.failures(ctx, []result{r})
				return nil, false, nil, err
			}
			return nil, false, &r, nil
		}
		cancel()
		l.gateReached.Store(true)
		waited = !ok
	}
	var took time.Duration // the wait for the gate
	// The round's validity runs from its first request: a gate queued
	// for in one call may have been free, its lease running from that
	// call's first attempt however late the reply came, and a wait
	// cannot be told from a late reply. Only a wait that followed a try
	// counts from when the gate was acquired.
	vstart := start
	if waited {
		gctx, cancel := context.WithTimeout(wait.FailFast(ctx), gateWait)
		err = l.members[g].LockContext(gctx)
		took = time.Since(start)
		timedOut = gctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			// The gate may be stuck held, or its server gone: try it
			// first next time.
			l.gateReached.Store(false)
			if ctx.Err() != nil {
				return nil, false, nil, err
			}
			if !timedOut && wait.Transient(err) || timedOut && queued {
				// Its server failed the wait's attempt, or, the wait
				// being the acquisition's only attempt on the gate, may
				// be the one that stalls: the first round counts it
				// down, as it would its own try, rather than try it
				// again for a member timeout more.
				return nil, timedOut, &result{down: true, err: err}, nil
			}
			return nil, timedOut, nil, nil
		}
		start = time.Now()
		if !queued {
			vstart = start
		}
	}
	res := l.tryOthers(ctx, g)
	rt := time.Since(start)
	busy := anyBusy(res)
	won, stuck := l.won(res, vstart), false
	if !won {
		won, stuck = l.awaitMajority(ctx, g, res, vstart, rt)
	}
	if won {
		// Queued at once, the gate was free if that call took no longer
		// than about the round trip of the tries after it.
		if !busy && (!waited || queued && took <= 2*rt) {
			l.contended.Store(false) // nothing was in the way
		}
		return newHold(res), false, nil, nil
	}
	l.release(ctx, heldOf(res))
	// Ended by ctx (or a member's error that cannot pass), it fails as a
	// round of acquire would: the caller's next round, after ctx's end,
	// could otherwise win with members that do not look at ctx, and
	// return a hold to a caller that gave up.
	if _, err := l.failures(ctx, res); err != nil {
		return nil, false, nil, err
	}
	return nil, stuck, nil, nil
}

// awaitMajority goes on from a round that holds the gate, the member it
// waited for, but not a majority: most often a newcomer (the last holder
// locking again) took some of the others in a round of its own, which it
// gives back at once since it found the gate busy (see acquire). Rather
// than let the gate go and try again later, while the newcomer queues for
// it, the round keeps the gate and waits for the first busy member that
// comes after the gate in canonical order, then tries the rest again,
// until it holds a majority within the validity. It waits for a member
// holding none that comes after it, as acquireOrdered does: it lets those
// go first (its tries take members in any order). Otherwise two rounds
// could each hold a member the other waits for, and both stall until a
// wait times out. Each wait is bounded by gateWait and by the validity
// left (a majority got past it cannot win, and the wait would only keep
// the members held from others), and it waits for each member at most
// once; one that times out (the member may be stuck held) goes on with
// the next. It reports whether the round won, and whether a wait timed
// out (stuck); res holds what it holds either way.
//
// What it waits for is most often a round that gives its members back as
// soon as its own tries reply, so each wait is bounded further by
// awaitRounds times the round trip of the tries that preceded it (rt),
// and no less than minAwait: a member stuck held then costs each waiter
// that holds the gate that short wait, not gateWait, which on a stuck
// member would queue every contender behind one another.
func (l *Lock) awaitMajority(ctx context.Context, gate int, res []result, start time.Time, rt time.Duration) (won, stuck bool) {
	bound := min(gateWait, max(minAwait, awaitRounds*rt))
	pos := make([]int, len(l.members)) // by member, its place in l.order
	for p, i := range l.order {
		pos[i] = p
	}
	for _, i := range l.order[pos[gate]+1:] {
		if !res[i].busy {
			continue
		}
		left := l.validity(start)
		if left <= 0 {
			return false, stuck // what it gets now cannot win
		}
		drop := make([]bool, len(l.members))
		for j, r := range res {
			if r.ok && pos[j] > pos[i] {
				drop[j], res[j] = true, result{}
			}
		}
		l.release(ctx, drop)
		wctx, cancel := context.WithTimeout(ctx, min(bound, left))
		err := l.members[i].LockContext(wctx)
		timedOut := wctx.Err() != nil && ctx.Err() == nil && left > bound
		cancel()
		switch {
		case err == nil:
			res[i] = result{ok: true}
			if l.won(res, start) {
				return true, stuck
			}
		case timedOut:
			// i may be stuck held (its holder gone, its lease not run
			// out): go on without it, as the next round would, rather
			// than give up the gate and wait for i again.
			stuck = true
		default:
			return false, stuck
		}
		skip := make([]bool, len(l.members))
		for j, r := range res {
			skip[j] = r.ok || r.err != nil // held, or failed (a busy member has no error)
		}
		for j, r := range l.tryAll(ctx, skip) {
			if !skip[j] {
				res[j] = r
			}
		}
		if l.won(res, start) {
			return true, stuck
		}
	}
	return false, stuck
}

// holding returns, by member, whether ctx's owner holds it now, or nil
// for a ctx without an owner. A member with a lost signal (a Done method,
// as dsync's locks have) says so itself, whichever handle or multi-lock
// the owner acquired it through; for another, the owner's newest hold of
// this group tells. It does no I/O.
func (l *Lock) holding(ctx context.Context) []bool {
	owner, ok := dsync.OwnerFrom(ctx)
	if !ok {
		return nil
	}
	var group []bool
	l.mu.Lock()
	if hs := l.holds[owner]; len(hs) > 0 {
		group = hs[len(hs)-1].held
	}
	l.mu.Unlock()
	mine := make([]bool, len(l.members))
	for i, m := range l.members {
		if d, ok := m.(interface {
			Done(context.Context) <-chan struct{}
		}); ok {
			select {
			case <-d.Done(ctx):
			default:
				mine[i] = true
			}
		} else {
			mine[i] = group != nil && group[i]
		}
	}
	return mine
}

// reentered reports whether a round re-entered a majority of members that
// were the owner's already (mine, see holding).
func (l *Lock) reentered(res []result, mine []bool) bool {
	n := 0
	for i, r := range res {
		if r.ok && mine != nil && mine[i] {
			n++
		}
	}
	return n >= l.quorum
}

// gateWait bounds RedLock's wait for one busy member.
const gateWait = time.Second

// awaitRounds and minAwait bound a RedLock round's wait for a member
// while it holds its gate (see awaitMajority).
const (
	awaitRounds = 8
	minAwait    = 100 * time.Millisecond
)
