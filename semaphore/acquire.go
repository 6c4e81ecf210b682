package semaphore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
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
	if err := s.h.Begin("acquire", ctx); err != nil {
		return err
	}
	owner, anon := core.LockOwner(ctx)
	op := dsync.NewID()
	handed := s.handedLease()
	var (
		got   core.Grant
		entry string // under which the waiter queues, once it joined the channel
	)
	err := wait.Acquire(ctx, wait.Spec{
		Backend:   s.h.B,
		Channel:   s.channel,
		WaiterID:  op, // a hand-off counts as the acquisition op
		Heartbeat: s.h.Cfg.WaiterTimeout / 3,
		Logger:    s.h.Cfg.Logger,
		Name:      s.h.Name,
		Try: func(ctx context.Context, a wait.Try) (wait.Result, error) {
			if a.Address != "" && entry == "" {
				entry = a.Address + "|" + strconv.FormatInt(n, 10) + "|" + strconv.FormatInt(core.Ms(handed), 10) + "|" + owner
			}
			return s.try(ctx, owner, op, n, entry, a.Prior > 0, &got)
		},
		Granted: func(token int64, since time.Time) bool {
			// As in the lock core: without time to spare, or on a
			// fixed lease longer than the hand-off's, the next attempt
			// confirms the permits and restarts their lease. So it does
			// when the owner holds permits already: the hand-off added
			// to that hold, whose id only the server's reply tells.
			if time.Since(since) >= handed/2 || (!s.h.Cfg.Watchdog && handed < s.h.Cfg.Lease) ||
				len(lease.Anywhere(s.h.Key, owner, role)) > 0 {
				return false
			}
			got = core.Grant{Count: n, Token: token, ID: op, Sent: since, TTL: handed}
			return true
		},
		Abandon: func(ctx context.Context) error {
			return s.abandon(ctx, owner, op, n, entry)
		},
	})
	if err != nil {
		return s.h.Wrap("acquire", err)
	}
	s.keep(owner, anon, got, n)
	return nil
}

// TryAcquire makes one attempt to acquire n permits for ctx's owner (or a
// fresh ownerless one, as Acquire), without waiting: it succeeds only if
// they are free and no live waiter is queued. It reports whether they were
// acquired. When the attempt fails with an error, nothing is left acquired.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (bool, error) {
	if err := s.check("tryacquire", n); err != nil {
		return false, err
	}
	if err := s.h.Begin("tryacquire", ctx); err != nil {
		return false, err
	}
	owner, anon := core.LockOwner(ctx)
	op := dsync.NewID()
	var got core.Grant
	r, err := s.try(ctx, owner, op, n, "", false, &got)
	if err != nil {
		// The attempt may have succeeded with its reply lost.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait.AbandonTimeout)
		s.abandon(actx, owner, op, n, "")
		cancel()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(cerr, err)
		}
		return false, s.h.Wrap("tryacquire", err)
	}
	if !r.Acquired {
		return false, nil
	}
	s.keep(owner, anon, got, n)
	return true, nil
}

// keep records n permits acquired by owner under got.
func (s *Semaphore) keep(owner string, anon bool, got core.Grant, n int64) {
	l := s.h.Keep(owner, false, got, s.holdSpec())
	if anon {
		s.mu.Lock()
		s.anon = append(s.anon, &anonHold{owner: owner, l: l, permits: n})
		s.mu.Unlock()
	}
}

func (s *Semaphore) try(ctx context.Context, owner, op string, n int64, entry string, registered bool, got *core.Grant) (wait.Result, error) {
	sent := time.Now()
	actx, release := wait.Detach(ctx)
	reply, err := s.h.B.Eval(actx, acquireScript, s.keys(), owner, op, n, core.Ms(s.h.Cfg.Lease), entry,
		core.Ms(s.h.Cfg.WaiterTimeout), core.Flag(registered), s.capacity, s.channel)
	release()
	if err != nil {
		return wait.Result{}, scriptError(err)
	}
	return core.AcquireReply(reply, sent, got)
}

func (s *Semaphore) abandon(ctx context.Context, owner, op string, n int64, entry string) error {
	_, err := wait.HandOff(ctx, s.h.B, s.channel, abandonScript, nil, s.keys(),
		owner, op, n, entry, s.channel, hub.Process())
	return err
}
