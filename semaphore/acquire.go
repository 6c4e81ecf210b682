package semaphore

import (
	"context"

	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/lease"
)

// Acquire acquires n permits for ctx's owner (see dsync.WithOwner), or
// with no owner in ctx, for a fresh owner whose permits this handle
// remembers (see Release). It waits its turn: requests are granted in the
// order they reached the server, and one that does not fit blocks later
// ones, however small, so that a large request is never starved. An owner
// that holds permits already adds n to them, in turn like anyone else.
//
// The wait ends when the permits are acquired or ctx is done; ctx's
// deadline is the longest wait. On failure the waiter leaves the queue at
// once, nothing is left acquired, and the error matches ctx.Err(), or is
// the backend error that cannot pass. n must be between 1 and the
// capacity, else the error matches dsync.ErrInvalidPermits without I/O; it
// does too, from the server, when a capacity set at runtime (SetCapacity)
// is below n. An error matching ErrCapacityMismatch reports a handle whose
// capacity differs from the semaphore's.
func (s *Semaphore) Acquire(ctx context.Context, n int64) error {
	if err := s.check("acquire", n); err != nil {
		return err
	}
	return s.h.Lock(ctx, s.spec(n))
}

// TryAcquire makes one attempt to acquire n permits for ctx's owner (or a
// fresh ownerless one, as Acquire), without waiting: it succeeds only if
// they are free and no live waiter is queued. It reports whether they were
// acquired. When the attempt fails with an error, nothing is left acquired.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (bool, error) {
	if err := s.check("tryacquire", n); err != nil {
		return false, err
	}
	return s.h.TryLock(ctx, s.spec(n))
}

// spec returns the description of an acquisition of n permits to the
// lock core, made once per handle for small n. It has no core.Local:
// queueing in the process first would reorder the waiters. The handle
// remembers its ownerless holds itself, with their permits (see Release).
func (s *Semaphore) spec(n int64) *core.LockSpec {
	if n > int64(len(s.specs)) {
		return s.newSpec(n)
	}
	p := &s.specs[n-1]
	if sp := p.Load(); sp != nil {
		return sp
	}
	sp := s.newSpec(n)
	if !p.CompareAndSwap(nil, sp) {
		sp = p.Load()
	}
	return sp
}

func (s *Semaphore) newSpec(n int64) *core.LockSpec {
	handed := s.h.HandedLease()
	return &core.LockSpec{
		Role:        role,
		Op:          "acquire",
		Channel:     s.channel,
		Heartbeat:   s.h.Cfg.WaiterTimeout / 3,
		Handed:      handed,
		EntryTTL:    s.h.Cfg.WaiterTimeout,
		Keys:        s.keys,
		Acquire:     acquireScript,
		Plain:       true, // a missing state is free: nobody queued, no runtime capacity (see lua/state.lua)
		Abandon:     abandonScript,
		Args:        []any{n, s.capArg},
		Refine:      scriptError,
		Fields:      []int64{n, core.Ms(handed)},
		PlainFields: []int64{n, s.capacity},
		Hold:        &s.hold,
		Units:       n,
		Confirm:     true,
		Kept: func(owner string, anon bool, l *lease.Lease) {
			if anon {
				s.mu.Lock()
				s.anon = append(s.anon, &anonHold{owner: owner, l: l, permits: n})
				s.mu.Unlock()
			}
		},
	}
}
