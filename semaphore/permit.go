package semaphore

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/wait"
)

// A Permit is a portable permit: one permit of the semaphore, named by an
// id rather than held by an owner, released or extended by that id from
// any process and through any backend value on the same server
// (ReleasePermit, ExtendPermit), as a job queue needs when the process
// that admits a job is not the one that finishes it.
//
// A portable permit counts against the capacity as any other (on the
// server it is a hold of one permit whose owner is its id). Its lease is
// fixed: the acquiring handle's lease (WithLease, or WithWatchdog's d, 30s
// by default), which no watchdog renews; ExtendPermit extends it. A permit
// whose lease runs out is returned by itself, whoever had it.
type Permit struct {
	// ID names the permit: 32 hex digits, random (dsync.NewID), so that
	// nobody can guess it.
	ID string
	// Expires is when the permit's lease ends, by this process's clock,
	// counted from when the acquisition's attempt that took it was sent
	// (for a permit handed to the waiting acquisition, its latest attempt
	// before the hand-off): the server ends it no sooner, but for clock
	// drift.
	Expires time.Time
}

// AcquirePermit acquires a portable permit, waiting its turn as
// Acquire(ctx, 1) does (ctx's owner, if any, plays no part: the permit is
// its own owner). The wait ends when the permit is acquired or ctx is
// done; on failure nothing is left acquired, and the error matches
// ctx.Err(), or is the backend error that cannot pass.
func (s *Semaphore) AcquirePermit(ctx context.Context) (Permit, error) {
	if err := s.check("acquire permit", 1); err != nil {
		return Permit{}, err
	}
	sp := *s.spec(1)
	lease := s.h.Cfg.Lease // a permit handed to a waiter gets it all: nothing renews it
	sp.Op, sp.Handed, sp.Fields, sp.Kept = "acquire permit", lease, []int64{1, core.Ms(lease)}, nil
	id, g, err := s.h.LockUnkept(ctx, &sp)
	if err != nil {
		return Permit{}, err
	}
	return Permit{ID: id, Expires: g.Sent.Add(g.TTL)}, nil
}

// ReleasePermit gives back the portable permit id. A permit that is not
// held, because it was released already, its lease ran out, or it never
// was, is an error matching dsync.ErrNotHeld, and nothing changes; so is
// an id that no permit can have, without I/O. The freed permit goes to the
// waiters at the head of the queue. A release retried after a lost reply
// is applied once; transient backend errors are retried until ctx ends,
// for a few seconds at most.
func (s *Semaphore) ReleasePermit(ctx context.Context, id string) error {
	if err := s.permitID("release permit", id); err != nil {
		return err
	}
	hd := s.h.Header(s.channel)
	hd.Owner, hd.Op, hd.HoldID, hd.Plain = id, core.ReleaseOp(), id, codec.PlainValue(id, id, role, 1, s.capacity)
	args := append(hd.Append(make([]any, 0, codec.HeaderLen+2)), 1, s.capArg)
	start := time.Now()
	for i := 1; ; i++ {
		r, err := s.h.HandOff(ctx, s.channel, releaseScript, s.keys, args...)
		switch {
		case err == nil && r.N < 0 && i == 1:
			return s.h.Wrap("release permit", fmt.Errorf("%w: permit %s", dsync.ErrNotHeld, id))
		case err == nil: // or the reply of an earlier attempt was lost
			return nil
		case !wait.Transient(err) || time.Since(start) > core.ReleaseTimeout || !wait.Sleep(ctx, wait.Backoff(i)):
			return s.h.Wrap("release permit", err)
		}
	}
}

// ExtendPermit makes the portable permit id expire no sooner than lease
// from now. It is an error matching dsync.ErrNotHeld when the permit is
// not held (see ReleasePermit), and one matching dsync.ErrInvalidLease,
// without I/O, when lease is under 1ms. It may be retried after an error.
func (s *Semaphore) ExtendPermit(ctx context.Context, id string, lease time.Duration) error {
	if err := s.permitID("extend permit", id); err != nil {
		return err
	} else if lease < time.Millisecond {
		return s.h.Wrap("extend permit", fmt.Errorf("%w: %v", dsync.ErrInvalidLease, lease))
	}
	reply, err := s.h.B.Eval(ctx, renewScript, s.keys[:2], 2, 3, id, core.Ms(lease), id)
	r, rerr := backend.Array(reply, 1)
	if err == nil && rerr == nil {
		if ok, _ := backend.Int(r[0]); ok != 1 {
			rerr = fmt.Errorf("%w: permit %s", dsync.ErrNotHeld, id)
		}
	}
	return s.h.Wrap("extend permit", cmp.Or(err, rerr))
}

// permitID reports an unusable handle or ctx, then an id that no permit can
// have (see dsync.NewID), before any I/O.
func (s *Semaphore) permitID(op, id string) error {
	if err := s.valid(); err != nil {
		return err
	}
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return s.h.Wrap(op, fmt.Errorf("%w: %q is not a permit id", dsync.ErrNotHeld, id))
	}
	return nil
}
