package waitgroup

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Add adds n units to the group's count, pending until Done counts each
// down, owned by g's owner and kept alive by g's lease (the watchdog's
// unless WithLease). n must be at least 1 and at most MaxUnits, else the
// error matches dsync.ErrInvalidPermits, without I/O; so does an Add that
// would take the group's count past MaxUnits, which adds nothing. When the
// call fails, nothing is left added: an Add whose reply was lost is
// undone.
func (g *WaitGroup) Add(ctx context.Context, n int64) error {
	if err := g.h.Begin("add", ctx); err != nil {
		return err
	} else if n < 1 || n > MaxUnits {
		return g.h.Wrap("add", fmt.Errorf("%w: %d units (at most %d)", dsync.ErrInvalidPermits, n, int64(MaxUnits)))
	}
	op, sent := dsync.NewID(), time.Now()
	// One call, not tried again: it waits for the reply as long as ctx
	// is alive (see wait.Watch).
	reply, err := g.h.Attempt(wait.Watch(ctx), addScript, g.keys, append(g.header(op, ""), n, core.Flag(g.keep), core.Ms(g.h.Cfg.WaiterTimeout))...)
	err = scriptError(err) // too many units: nothing added, the undo finds nothing
	r, rerr := codec.AttemptReply(reply, op, g.h.Cfg.Lease)
	if err = cmp.Or(err, rerr); err != nil {
		wait.Cleanup(ctx, func(ctx context.Context) {
			g.h.HandOff(ctx, g.channel, doneScript, g.keys, append(g.header(core.ReleaseOp(), ""), n, op)...)
		})
		return g.h.Wrap("add", err)
	}
	l := g.h.Keep(g.owner, false, core.Grant{Count: r.Count, Token: r.Token, ID: r.ID, Sent: sent, TTL: r.TTL}, &g.hold, n, false)
	g.mu.Lock()
	defer g.mu.Unlock()
	if l != g.l {
		g.l, g.pending = l, 0 // the earlier hold ended, its units with it
	}
	g.pending += n
	return nil
}

// Done counts one of the units added through g down. The group's count
// reaching 0 wakes every Wait. With no unit of g pending, the error
// matches dsync.ErrNotHeld, without I/O; it does too when g's units were
// lost (abandoned, or the group's state vanished). Done runs detached
// from ctx's cancellation and is applied once however often it is retried
// after a lost reply, as a mutex's unlock is, and returns by ctx's
// deadline plus 100ms; if it fails, g's remaining units are left to their
// lease, at whose end they are abandoned.
func (g *WaitGroup) Done(ctx context.Context) error {
	g.mu.Lock()
	l := g.l
	switch {
	case l == nil || g.pending == 0:
		g.mu.Unlock()
		return cmp.Or(g.h.Check(), g.h.Wrap("done", fmt.Errorf("%w: no unit pending through this handle", dsync.ErrNotHeld)))
	case !l.Releasable():
		g.l, g.pending = nil, 0
		g.mu.Unlock()
		return g.h.Wrap("done", fmt.Errorf("%w: %w", dsync.ErrNotHeld, core.ErrLost))
	}
	g.pending--
	g.mu.Unlock()
	_, err := g.h.ReleaseHold(ctx, l, 1, &g.done)
	return g.h.Wrap("done", err)
}
