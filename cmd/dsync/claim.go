package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/mutex"
)

// A claim is what run takes before it starts the command and holds while
// the command runs: the mutex called name, or with -elect a term in the
// election called name. It is all run knows of the lock: Campaign is
// acquire, and a *election.Term has Token, Done and Resign.
type claim interface {
	// acquire blocks until the claim is held and returns the hold. wait
	// bounds the wait: forever if negative, a single attempt if zero. It
	// returns an error matching errNotAcquired when wait ran out, and one
	// matching ctx's error when ctx ended first.
	acquire(ctx context.Context, wait time.Duration) (hold, error)
	// String names the claim in messages: mutex "jobs:nightly".
	String() string
}

// A hold is a claim held.
type hold interface {
	// token returns the hold's fencing token, which run passes to the
	// command as DSYNC_TOKEN.
	token() int64
	// done returns a channel closed when the hold is lost. run watches it
	// only until it releases the hold.
	done() <-chan struct{}
	// release gives the hold up. It is bounded by ctx.
	release(ctx context.Context) error
}

// newClaim returns the claim run takes: the mutex called name, or with
// -elect a campaign with -value in the election called name, on a lease
// renewed by the watchdog.
func newClaim(b backend.Backend, name string, f runFlags, logger *slog.Logger) claim {
	if f.elect {
		e := election.New(b, name, election.WithPrefix(f.prefix), election.WithWatchdog(f.lease), election.WithLogger(logger))
		return electionClaim{e, f.value}
	}
	return mutexClaim{mutex.New(b, name, mutex.WithPrefix(f.prefix), mutex.WithWatchdog(f.lease), mutex.WithLogger(logger))}
}

// within runs acquire, a blocking acquisition, bounded by wait as
// claim.acquire says, and try for a wait of zero.
func within(ctx context.Context, wait time.Duration, acquire func(context.Context) error, try func(context.Context) (bool, error)) error {
	switch {
	case wait == 0:
		ok, err := try(ctx)
		if err == nil && !ok {
			err = errNotAcquired
		}
		return err
	case wait > 0:
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		err := acquire(wctx)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w within %v", errNotAcquired, wait)
		}
		return err
	}
	return acquire(ctx)
}

// errNotAcquired is a claim that was not acquired within its wait.
var errNotAcquired = errors.New("not acquired")

// mutexClaim is the mutex called name. Its hold is ownerless, as with
// sync.Mutex: the handle remembers it, and Token, Done and UnlockContext
// without an owner in their context refer to it.
type mutexClaim struct {
	m *mutex.Mutex
}

func (c mutexClaim) String() string { return fmt.Sprintf("%s %q", kindMutex, c.m.Name()) }

func (c mutexClaim) acquire(ctx context.Context, wait time.Duration) (hold, error) {
	if err := within(ctx, wait, c.m.LockContext, c.m.TryLockContext); err != nil {
		return nil, err
	}
	// Lost already if Token fails: Done is closed, and run says so.
	t, _ := c.m.Token(context.Background())
	return mutexHold{m: c.m, tok: t}, nil
}

// mutexHold is the hold of a mutexClaim.
type mutexHold struct {
	m   *mutex.Mutex
	tok int64
}

func (h mutexHold) token() int64 { return h.tok }

func (h mutexHold) done() <-chan struct{} { return h.m.Done(context.Background()) }

func (h mutexHold) release(ctx context.Context) error { return h.m.UnlockContext(ctx) }

// electionClaim is a campaign with value in an election.
type electionClaim struct {
	e     *election.Election
	value string
}

func (c electionClaim) String() string { return fmt.Sprintf("%s %q", kindElection, c.e.Name()) }

func (c electionClaim) acquire(ctx context.Context, wait time.Duration) (hold, error) {
	var t *election.Term
	err := within(ctx, wait, func(ctx context.Context) (err error) {
		t, err = c.e.Campaign(ctx, c.value)
		return err
	}, func(ctx context.Context) (ok bool, err error) {
		t, ok, err = c.e.TryCampaign(ctx, c.value)
		return ok, err
	})
	if err != nil {
		return nil, err
	}
	// Lost already if Token fails with ErrNotHeld: Done is closed, and run
	// says so. Any other failure (ctx ended, or the server failed while the
	// token was drawn) leaves a term the command cannot be fenced by: give
	// it back, bounded by the connection's timeout on each call.
	tok, err := t.Token(ctx)
	if err != nil && !errors.Is(err, dsync.ErrNotHeld) {
		t.Resign(context.Background())
		return nil, err
	}
	return termHold{t: t, tok: tok}, nil
}

// termHold is the hold of an electionClaim: a term, and its token drawn
// when it was taken.
type termHold struct {
	t   *election.Term
	tok int64
}

func (h termHold) token() int64 { return h.tok }

func (h termHold) done() <-chan struct{} { return h.t.Done() }

func (h termHold) release(ctx context.Context) error { return h.t.Resign(ctx) }
