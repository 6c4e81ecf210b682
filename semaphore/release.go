package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Release gives back n permits of ctx's owner taken through s's backend
// value; the freed permits go to the waiters at the
// head of the queue, in the same script, as many as fit.
//
// With no owner in ctx, it gives back n of the ownerless permits acquired
// through s, from any goroutine, as golang.org/x/sync/semaphore does: from
// the oldest ownerless acquisition first, spreading over the next ones when
// n exceeds what the oldest has left (one release script per acquisition
// it touches). An acquisition stays remembered until all its permits are
// given back.
//
// The release does not depend on ctx's cancellation and is bounded by a
// few seconds of its own and by the permits' lease; if it fails, the
// watchdog stops and the permits expire by themselves. The call returns by
// ctx's deadline plus 100ms (see the package dsync documentation): if the
// outcome is not known by then, the error matches ctx.Err() and the
// release goes on in the background. A release retried after a lost reply is applied
// once. It returns an error matching dsync.ErrNotHeld when the owner (or
// the handle, for ownerless permits) holds fewer than n permits, without
// I/O when that is known here, and nothing is released then; one too when
// the permits were lost (their lease ended). n must be between 1 and the
// capacity, else the error matches dsync.ErrInvalidPermits, without I/O.
func (s *Semaphore) Release(ctx context.Context, n int64) error {
	if err := s.check("release", n); err != nil {
		return err
	}
	if _, ok := dsync.OwnerFrom(ctx); ok {
		owner, l := s.h.Take(ctx, role)
		if l == nil {
			return s.h.NotHeld("release", owner, role)
		}
		if !l.Releasable() {
			return s.h.Wrap("release", fmt.Errorf("%w: %w", dsync.ErrNotHeld, core.ErrLost))
		}
		return s.h.Wrap("release", s.release(ctx, owner, l, n))
	}
	type part struct {
		a *anonHold
		n int64
	}
	var parts []part
	s.mu.Lock()
	var total int64
	for _, a := range s.anon {
		total += a.permits
	}
	if total < n {
		s.mu.Unlock()
		return s.h.Wrap("release", fmt.Errorf("%w: %d ownerless permits held through this handle, fewer than %d", dsync.ErrNotHeld, total, n))
	}
	for left := n; left > 0; {
		a := s.anon[0]
		k := min(left, a.permits)
		a.permits -= k
		left -= k
		parts = append(parts, part{a, k})
		if a.permits == 0 {
			s.anon[0] = nil
			s.anon = s.anon[1:]
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, p := range parts {
		if !p.a.l.Releasable() {
			errs = append(errs, fmt.Errorf("%w: %w", dsync.ErrNotHeld, core.ErrLost))
			continue
		}
		if err := s.release(ctx, p.a.owner, p.a.l, p.n); err != nil {
			errs = append(errs, err)
		}
	}
	return s.h.Wrap("release", errors.Join(errs...))
}

// release gives back n permits of owner's hold l.
func (s *Semaphore) release(ctx context.Context, owner string, l *lease.Lease, n int64) error {
	args := []any{owner, dsync.NewID(), n, core.RestoredLease(l), s.channel, s.h.HubID(), l.ID()}
	refused := false
	left, err := s.h.Release(ctx, l, n, func(ctx context.Context, _ bool) (wait.Reply, error) {
		r, err := s.h.HandOff(ctx, s.channel, releaseScript, s.keys(), args...)
		// A refusal (fewer than n held) leaves the hold as it is: the
		// core keeps its lease, as after a partial release.
		refused = err == nil && strings.HasPrefix(r.HoldID, "!")
		if refused {
			r.HoldID, r.Refused = r.HoldID[1:], true
		}
		return r, err
	})
	if err == nil && refused {
		return fmt.Errorf("%w: the owner holds %d permits, fewer than %d", dsync.ErrNotHeld, left, n)
	}
	return err
}
