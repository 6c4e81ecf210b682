package election

import (
	"context"
	"errors"

	"github.com/dsyncgo/dsync/internal/wait"
)

// Run is the leadership loop, after Kubernetes' leaderelection.RunOrDie:
// it campaigns with value, and while it leads calls lead with the term and
// a context that is cancelled when the term ends (see CampaignScope: its
// cause matches dsync.ErrNotHeld and says how when the term is lost); when
// lead returns it resigns, and campaigns again, until ctx ends.
//
//	err := e.Run(ctx, hostname, func(ctx context.Context, t *election.Term) error {
//		tok, err := t.Token(ctx)
//		if err != nil {
//			return err
//		}
//		return compact(ctx, tok) // until ctx ends: the term is over
//	})
//
// lead is OnStartedLeading and its return OnStoppedLeading: it should
// work until its ctx ends, and return then. What its return means:
//
//   - nil: the term is resigned and Run campaigns again at once (so a lead
//     with nothing to do should wait for its ctx rather than return).
//   - an error while the term is still on: the term is resigned and Run
//     returns the error, for the caller to decide.
//   - anything once the term has ended (lost, or ctx ended): the error is
//     taken as lead's reaction to that; Run campaigns again, or returns if
//     ctx ended.
//
// Run returns when ctx ends, with an error matching ctx.Err(), after
// resigning a term it held (at most half a second after ctx's deadline,
// as Campaign, or the resignation's own few seconds). It returns at once
// an error that cannot pass: bad arguments (see New), dsync.ErrClosed for
// a closed backend, dsync.ErrUnexpectedReply for an election key that
// dsync did not write, the server's refusal of a command (see Campaign).
// Campaign rides out the backend errors that may
// pass (connection failures, a restarting server); should one reach Run,
// it campaigns again after a backoff (10ms doubling to 1s, with jitter).
//
// A leader whose process dies leaves its term to run out: the next
// candidate's lead starts within the lease (WithWatchdog; 30s by
// default), plus a round trip.
func (e *Election) Run(ctx context.Context, value string, lead func(ctx context.Context, t *Term) error) error {
	if err := e.h.Check(); err != nil {
		return err
	}
	if lead == nil {
		return e.h.Wrap("run", errors.New("nil lead function"))
	}
	failures := 0
	for {
		t, err := e.Campaign(ctx, value)
		switch {
		case ctx.Err() != nil:
			if t != nil {
				t.Resign(context.WithoutCancel(ctx))
			}
			return e.h.Wrap("run", ctx.Err())
		case err != nil && !wait.Transient(err):
			return err
		case err != nil:
			failures++
			if !wait.Sleep(ctx, wait.Backoff(failures)) {
				return e.h.Wrap("run", ctx.Err())
			}
			continue
		}
		failures = 0
		if err := e.lead(ctx, t, lead); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return e.h.Wrap("run", ctx.Err())
		}
	}
}

// lead runs one term: lead with the term's context, then the resignation
// (even if lead panics). It returns lead's error if lead failed while the
// term was on.
func (e *Election) lead(ctx context.Context, t *Term, lead func(context.Context, *Term) error) error {
	sctx, resign := t.scope(ctx)
	defer resign()
	if err := lead(sctx, t); err != nil && sctx.Err() == nil {
		return err
	}
	return nil
}
