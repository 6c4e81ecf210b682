package election

import (
	"context"
)

// CampaignScope campaigns as Campaign does and returns the term as a
// context, cancelled when the term ends, and resign, which ends it, as
// mutex.Mutex.LockScope does for a hold:
//
//	ctx, resign, err := e.CampaignScope(ctx, "host-a:8080")
//	if err != nil {
//		return err
//	}
//	defer resign()
//	tok, err := election.TermOf(ctx).Token(ctx)
//	if err != nil {
//		return err
//	}
//	return lead(ctx, tok) // stops when the term ends
//
// When the term is lost (its key vanished, ForceResign took it, renewals
// failed until the lease ran out, a fixed lease ran out),
// context.Cause of the context matches dsync.ErrNotHeld and says how;
// after resign, or when ctx itself ends, it is ctx's cause
// (context.Canceled after resign). TermOf returns the term from the
// context, for its Token and Proclaim. Ending ctx cancels the returned
// context but does not resign: call resign, always. resign cancels the
// context first, then resigns as Term.Resign does, bounded by the
// resignation's own few seconds rather than a ctx, once; later calls
// return the first's result. Run is the loop that campaigns again after
// each term.
//
// On failure CampaignScope returns Campaign's error and a nil context and
// function.
func (e *Election) CampaignScope(ctx context.Context, value string) (context.Context, func() error, error) {
	t, err := e.Campaign(ctx, value)
	if err != nil {
		return nil, nil, err
	}
	sctx, resign := t.scope(ctx)
	return sctx, resign, nil
}

// scope returns the term as a context derived from ctx, carrying it, and
// the function that resigns it.
func (t *Term) scope(ctx context.Context) (context.Context, func() error) {
	return t.e.h.ScopeLease(context.WithValue(ctx, termKey{}, t), t.l, errLost, func() error {
		return t.Resign(context.WithoutCancel(ctx))
	})
}

type termKey struct{}

// TermOf returns the term whose context ctx is, or is derived from (see
// CampaignScope and Run), or nil.
func TermOf(ctx context.Context) *Term {
	t, _ := ctx.Value(termKey{}).(*Term)
	return t
}
