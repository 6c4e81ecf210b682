package semaphore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/lease"
)

// Release gives back n permits of ctx's owner taken through s's backend
// value; the freed permits go to the waiters at the
// head of the queue, in the same script, as many as fit.
//
// With no owner in ctx, it gives back n of the ownerless permits acquired
// through s, from any goroutine, as golang.org/x/sync/semaphore does: from
// the oldest ownerless acquisition first, spreading over the next ones when
// n exceeds what the oldest has left (one release script per acquisition
// it touches, sent in parallel, so that the call keeps its deadline
// however many it touches). An acquisition stays remembered until all its
// permits are given back.
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
// the permits were lost (their lease ended). An ownerless release whose n
// permits would include some known lost, or, spread over several
// acquisitions, some whose lease ended here (the server may still hold
// them for a margin), is refused before any I/O: the
// lost ones are forgotten (the release reported them) and the live ones
// stay held, rather than a part of n given back. A loss that only the
// server finds fails the release of that acquisition's share; the others
// are given back. n must be between 1 and the capacity, else the error
// matches dsync.ErrInvalidPermits, without I/O.
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
	var buf [2]part
	parts, err := s.takeAnon(n, buf[:0])
	if err != nil {
		return s.h.Wrap("release", err)
	}
	if len(parts) == 1 {
		return s.h.Wrap("release", s.release(ctx, parts[0].a.owner, parts[0].a.l, parts[0].n))
	}
	// Each share is a release of its own, which returns by ctx's deadline
	// plus the grace: one after another, their overruns would add up.
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.release(ctx, p.a.owner, p.a.l, p.n)
		}()
	}
	wg.Wait()
	return s.h.Wrap("release", errors.Join(errs...))
}

// part is the share of an ownerless release that falls on one
// acquisition.
type part struct {
	a    *anonHold
	n    int64
	lost bool // the acquisition's lease ended
}

// takeAnon takes n of the ownerless permits acquired through s off the
// handle, from the oldest acquisition on, and returns the share of each,
// appended to parts.
// A release is refused, and the handle left as it was, when the handle
// holds fewer than n. It is refused too when the permits it would cover
// include some whose lease ended: those are forgotten, since a release
// reported their loss, and the live ones stay held, so that the refused
// release gives nothing back (as one of more than is held), instead of
// the part of it that fell on live permits.
func (s *Semaphore) takeAnon(n int64, parts []part) ([]part, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lost int64
	for i, left := 0, n; left > 0; i++ {
		if i == len(s.anon) {
			var total int64
			for _, a := range s.anon {
				total += a.permits
			}
			return nil, fmt.Errorf("%w: %d ownerless permits held through this handle, fewer than %d", dsync.ErrNotHeld, total, n)
		}
		a := s.anon[i]
		k := min(left, a.permits)
		left -= k
		parts = append(parts, part{a: a, n: k})
	}
	// A release of one acquisition is sent while the server may still
	// hold it. One spread over several is not once any of them ended
	// here, in the margin before the server's expiry included: the server
	// would refuse that share alone and give back the others.
	for i := range parts {
		l := parts[i].a.l
		if len(parts) == 1 && !l.Releasable() || len(parts) > 1 && l.Ended() {
			parts[i].lost = true
			lost += parts[i].n
		}
	}
	for _, p := range parts {
		if lost == 0 || p.lost {
			p.a.permits -= p.n
		}
	}
	s.anon = slices.DeleteFunc(s.anon, func(a *anonHold) bool { return a.permits == 0 })
	if lost > 0 {
		return nil, fmt.Errorf("%w: %w: %d of the %d permits", dsync.ErrNotHeld, core.ErrLost, lost, n)
	}
	return parts, nil
}

// release gives back n permits of owner's hold l.
func (s *Semaphore) release(ctx context.Context, owner string, l *lease.Lease, n int64) error {
	left, err := s.h.ReleaseHold(ctx, l, n, &s.releases)
	if errors.Is(err, core.ErrRefused) {
		return fmt.Errorf("%w: the owner holds %d permits, fewer than %d", dsync.ErrNotHeld, left, n)
	}
	return err
}
