package multilock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/dsyncgo/dsync/internal/wait"
)

// tryAll makes one attempt on every member not in skip, in parallel (the
// last in the calling goroutine).
func (l *Lock) tryAll(ctx context.Context, skip []bool) []result {
	res := make([]result, len(l.members))
	mctx := ctx
	if l.redlock {
		// A server that stalls must not hold up the round: the others
		// are a majority without it. The members start together, so one
		// timer bounds each of them.
		var cancel context.CancelFunc
		mctx, cancel = context.WithTimeout(ctx, l.memberTimeout())
		defer cancel()
	}
	try := func(i int) {
		ok, err := l.members[i].TryLockContext(mctx)
		// A member's timeout, or an error that passes, is a member
		// down for now; ctx's end is not.
		down := err != nil && ctx.Err() == nil && (mctx.Err() != nil || wait.Transient(err))
		res[i] = result{ok: ok && err == nil, busy: !ok && err == nil, down: down, err: err}
	}
	each(len(l.members), func(i int) bool { return skip == nil || !skip[i] }, try)
	return res
}

// tryOthers tries every member but held, which the caller holds, in
// parallel, and returns the round's results with held's as acquired.
func (l *Lock) tryOthers(ctx context.Context, held int) []result {
	skip := make([]bool, len(l.members))
	skip[held] = true
	res := l.tryAll(ctx, skip)
	res[held] = result{ok: true}
	return res
}

// anyBusy reports whether a round found a member held by another owner.
func anyBusy(res []result) bool {
	return slices.ContainsFunc(res, func(r result) bool { return r.busy })
}

// each runs f for every i < n that pick accepts, in parallel, the last one
// in the calling goroutine, and returns when all have.
func each(n int, pick func(int) bool, f func(int)) {
	last := -1
	var wg sync.WaitGroup
	for i := range n {
		if !pick(i) {
			continue
		}
		if j := last; j >= 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				growStack()
				f(j)
			}()
		}
		last = i
	}
	if last >= 0 {
		f(last)
	}
	wg.Wait()
}

// growStack grows a member's goroutine's stack to 8 KiB at once, while
// the goroutine is shallow: a member's call reaches about that deep (a
// lock's core, the backend, the client's write path), and a goroutine
// starts with 2 KiB, so that growing on the way down would copy every
// frame twice. Measured on a RedLock of 5 (BenchmarkMultiLockRedLock,
// uncontended, redigo): stack copies fell from a tenth of the client's
// CPU to 2%, its CPU per lock+unlock by a tenth.
//
//go:noinline
func growStack() {
	var pad [6 << 10]byte
	keepFrame(pad[:])
}

// keepFrame keeps growStack's frame from being optimized away.
//
//go:noinline
func keepFrame([]byte) {}

// memberTimeout bounds one attempt on one RedLock member: a twentieth of
// the lease, between 50ms and 1s, so that a stalled server costs a round
// a small part of the validity.
func (l *Lock) memberTimeout() time.Duration {
	return min(max(l.lease/20, 50*time.Millisecond), time.Second)
}

// ownedBy is a context with the deadline and cancellation of the
// caller's, and the values of the owner's: an unlock keeps its caller's
// deadline and releases the members for the owner of the group hold,
// which an ownerless unlock's ctx does not carry.
type ownedBy struct {
	context.Context // the caller's
	owner           context.Context
}

func (c ownedBy) Value(key any) any {
	if v := c.owner.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}
