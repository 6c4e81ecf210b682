package multilock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dsyncgo/dsync/internal/wait"
)

// LockContext acquires the group for ctx's owner (or a fresh ownerless
// hold), waiting while members are held by others, until ctx is done; see
// the package documentation. On failure nothing is left held and the
// error matches ctx.Err() or is a member's error.
func (l *Lock) LockContext(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("multilock: lock: %w", err)
	}
	oc, anon := ownerCtx(ctx)
	h, err := l.acquire(oc, true, anon)
	if err != nil {
		return fmt.Errorf("multilock: lock: %w", err)
	}
	l.keep(oc, anon, h)
	return nil
}

// TryLockContext makes one round of attempts on the members, in parallel,
// and reports whether the group is held now. It does not wait for a
// member held by another owner. When it fails, nothing is left held.
func (l *Lock) TryLockContext(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("multilock: trylock: %w", err)
	}
	oc, anon := ownerCtx(ctx)
	h, err := l.acquire(oc, false, anon)
	if err != nil {
		return false, fmt.Errorf("multilock: trylock: %w", err)
	}
	if h == nil {
		return false, nil
	}
	l.keep(oc, anon, h)
	return true, nil
}

// Lock acquires the group for a fresh ownerless hold, as sync.Mutex does,
// waiting however long it takes; it panics on an invalid lock or an error
// that cannot pass.
func (l *Lock) Lock() {
	if err := l.LockContext(context.Background()); err != nil {
		panic(err.Error())
	}
}

// result is the outcome of one attempt on a member.
type result struct {
	ok   bool
	busy bool // held by another owner
	down bool // err says the member could not be reached, for now
	err  error
}

// acquire runs rounds of attempts until the group is held, ctx is done,
// or (without block) one round failed. It returns nil and no error when a
// try found the group held by others. fresh says ctx's owner was made for
// this acquisition, and so holds nothing.
func (l *Lock) acquire(ctx context.Context, block, fresh bool) (*hold, error) {
	// A waiting RedLock queues: a round that finds a member busy does not
	// win with a majority of the others, but waits for that member, whose
	// waiters get it in turn. Otherwise a newcomer (the holder locking
	// again, say) takes the free majority from under a waiter that was
	// just handed the busy member, and waits grow without bound. A member
	// stuck held (its holder gone, its lease not yet run out) must not stop
	// a majority, though: after a wait for it times out, the next round may
	// win without it.
	//
	// A round that re-enters a majority the owner holds already takes it
	// from nobody, though: it wins without waiting for a busy member it
	// does not need.
	queue := block && l.redlock
	var known *result // the gate's, for the first round (see gateFirst)
	if queue && l.contended.Load() && (fresh || !slices.Contains(l.holding(ctx), true)) {
		h, timedOut, gate, err := l.gateFirst(ctx)
		if h != nil || err != nil {
			return h, err
		}
		if timedOut {
			queue = false // as after the gate's wait timed out
		}
		known = gate
	}
	for round := 0; ; round++ {
		res, won := l.tryRound(ctx, queue, fresh, known)
		known = nil
		if won {
			return newHold(res), nil
		}
		l.release(ctx, heldOf(res))
		if l.redlock && anyBusy(res) {
			l.contended.Store(true)
		}
		down, err := l.failures(ctx, res)
		if err != nil {
			return nil, err
		}
		if !block {
			if len(down) > 0 && (!l.redlock || len(res)-len(down) < l.quorum) {
				return nil, errors.Join(down...) // no majority reachable
			}
			return nil, nil
		}
		if !l.redlock {
			return l.acquireOrdered(ctx)
		}
		gate := l.firstBusy(res)
		if gate < 0 {
			// Nothing to wait for (members unreachable for now, or, for
			// RedLock, too slow for the validity): back off and try
			// again.
			if !wait.Sleep(ctx, backoff(round)) {
				return nil, errors.Join(append([]error{ctx.Err()}, down...)...)
			}
			continue
		}
		var h *hold
		h, queue, err = l.throughGate(ctx, gate, round)
		if h != nil || err != nil {
			return h, err
		}
	}
}

// tryRound tries every member at once and reports whether the round won
// the group: a quorum (all, for All) within the validity, which a queueing
// round takes only where no member was busy or it re-entered what the
// owner held (see acquire). known, if not nil, is the gate's result of an
// attempt just made (see gateFirst), which the round counts as its own.
func (l *Lock) tryRound(ctx context.Context, queue, fresh bool, known *result) ([]result, bool) {
	var mine []bool
	if queue && !fresh {
		mine = l.holding(ctx)
	}
	start := time.Now()
	var skip []bool
	if known != nil {
		// The gate's attempt failed just before: a server that stalls
		// costs the acquisition one member timeout, not two.
		skip = make([]bool, len(l.members))
		skip[l.order[0]] = true
	}
	res := l.tryAll(ctx, skip)
	if known != nil {
		res[l.order[0]] = *known
	}
	if res[l.order[0]].err != nil {
		// Won or not, the gate did not answer: the next queueing for it
		// tries it first (see gateFirst).
		l.gateReached.Store(false)
	}
	return res, l.won(res, start) && (!queue || !anyBusy(res) || l.reentered(res, mine))
}

// firstBusy returns the first member in canonical order that res found
// held by another owner, or -1.
func (l *Lock) firstBusy(res []result) int {
	for _, i := range l.order {
		if res[i].busy {
			return i
		}
	}
	return -1
}

// throughGate waits for gate, a busy member, then tries the others while
// holding it. The wait is bounded: the member's server may be the one
// that is gone, or its hold stuck. It returns the hold if it won; else
// nothing is held, and it reports whether the next round queues (not
// after the gate's wait, or the wait for a majority, timed out) or the
// error that ends the acquisition.
func (l *Lock) throughGate(ctx context.Context, gate, round int) (h *hold, queue bool, err error) {
	gctx, cancel := context.WithTimeout(ctx, gateWait)
	err = l.members[gate].LockContext(gctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, err
		}
		return nil, false, nil // the next round counts the member as it finds it
	}
	start := time.Now()
	res := l.tryOthers(ctx, gate)
	if l.won(res, start) {
		return newHold(res), true, nil
	}
	won, stuck := l.awaitMajority(ctx, gate, res, start, time.Since(start))
	if won {
		return newHold(res), true, nil
	}
	l.release(ctx, heldOf(res))
	if _, err := l.failures(ctx, res); err != nil {
		return nil, false, err
	}
	if !wait.Sleep(ctx, rand.N(time.Millisecond<<min(round, 4))) {
		return nil, false, ctx.Err()
	}
	return nil, !stuck, nil
}

// acquireOrdered acquires every member for All once a parallel round
// failed, as ordered locking does: it holds a prefix of the members in
// canonical order, waits (LockContext, woken by the member's pub/sub
// wake-ups) for the first member it lacks, then tries all the others in
// parallel, keeps the longest canonical prefix it now holds, releases
// the rest, and repeats. A group waits only for a member that comes after
// every member it holds, so groups that order their members alike cannot
// deadlock, and a member's waiters get it in turn, so none starves. A wait
// while holding members is bounded by holdWait: members that order alike
// but are not alike (same type and name on different backends, or
// members without a name) cost a group that wait, not a deadlock.
func (l *Lock) acquireOrdered(ctx context.Context) (*hold, error) {
	held := make([]bool, len(l.members))
	fail := func(err error) (*hold, error) {
		l.release(ctx, held)
		return nil, err
	}
	for round := 0; ; round++ {
		gate, holding := -1, false
		for _, i := range l.order {
			if held[i] {
				holding = true
			} else if gate < 0 {
				gate = i
			}
		}
		if gate < 0 {
			return &hold{held: held, done: make(chan struct{}), stop: make(chan struct{}), gone: make(chan struct{})}, nil
		}
		gctx, cancel := ctx, context.CancelFunc(func() {})
		if holding {
			gctx, cancel = context.WithTimeout(ctx, holdWait+rand.N(holdWait/2))
		}
		err := l.members[gate].LockContext(gctx)
		timedOut := gctx.Err() != nil
		cancel()
		if err != nil {
			if ctx.Err() != nil || !holding || !timedOut {
				return fail(err)
			}
			// Waited too long holding others: let them go, start over.
			l.release(ctx, held)
			clear(held)
			if !wait.Sleep(ctx, backoff(round)) {
				return nil, ctx.Err()
			}
			continue
		}
		held[gate] = true
		res := l.tryAll(ctx, held)
		for i, r := range res {
			if r.ok {
				held[i] = true
			}
		}
		if _, err := l.failures(ctx, res); err != nil {
			return fail(err)
		}
		// Keep the canonical prefix held; release what follows a gap.
		drop := make([]bool, len(held))
		gap := false
		for _, i := range l.order {
			switch {
			case !held[i]:
				gap = true
			case gap:
				drop[i], held[i] = true, false
			}
		}
		l.release(ctx, drop)
	}
}

// holdWait bounds All's wait for a member while it holds others.
const holdWait = 2 * time.Second

// failures sorts out a failed round: it returns the errors of members that
// could not be reached (worth another round), or an error that ends the
// acquisition: ctx's end, or a member's error that cannot pass.
func (l *Lock) failures(ctx context.Context, res []result) (down []error, err error) {
	var fatal []error
	for _, r := range res {
		switch {
		case r.err == nil:
		case r.down:
			down = append(down, r.err)
		default:
			fatal = append(fatal, r.err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(append([]error{err}, append(fatal, down...)...)...)
	}
	if len(fatal) > 0 {
		return nil, errors.Join(fatal...)
	}
	return down, nil
}

// won reports whether a round that began at start holds the group: every
// member (All), or a majority with validity left (RedLock).
func (l *Lock) won(res []result, start time.Time) bool {
	n := 0
	for _, r := range res {
		if r.ok {
			n++
		}
	}
	if n < l.quorum {
		return false
	}
	return !l.redlock || l.validity(start) > 0
}

// validity returns what is left of the validity of a RedLock round that
// began at start: the lease less the time since less the drift allowance.
func (l *Lock) validity(start time.Time) time.Duration {
	drift := time.Duration(float64(l.lease)*l.drift) + 2*time.Millisecond
	return l.lease - time.Since(start) - drift
}

func newHold(res []result) *hold {
	return &hold{held: heldOf(res), done: make(chan struct{}), stop: make(chan struct{}), gone: make(chan struct{})}
}

func heldOf(res []result) []bool {
	held := make([]bool, len(res))
	for i, r := range res {
		held[i] = r.ok
	}
	return held
}

// backoff returns the pause after the n-th round with nothing to wait for:
// exponential from 10ms, capped at 500ms, with jitter.
func backoff(n int) time.Duration {
	d := min(10*time.Millisecond<<min(n, 6), 500*time.Millisecond)
	return d/2 + rand.N(d/2+1)
}
