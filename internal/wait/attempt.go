package wait

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// SettleGrace is how long an attempt still in flight when its context
// ends may take to answer before it is cut off (see AttemptContext). With
// CleanupBudget, it bounds how long after its context ends a failed
// acquisition returns: the documented half second, less a margin for
// scheduling.
const SettleGrace = 350 * time.Millisecond

// AttemptContext returns the context for one attempt on ctx's behalf, and
// a function to call when the attempt is over. A script that was sent
// runs on the server whether or not its caller waits for the reply,
// possibly after a clean-up sent on another connection meant to undo it;
// waiting for the reply orders the two. So the returned context ends
// SettleGrace after ctx does, not with it, and the caller learns the
// attempt's result unless the server takes longer than that.
//
// A context with a deadline gets one that is never cancelled, with a
// deadline SettleGrace after ctx's, which a backend honours on the
// connection itself (backend rule 7) without a goroutine per call: a
// cancellation before the deadline ends the attempt when the server
// answers it. A context that can be cancelled but has no deadline gets
// one that is never cancelled either, with a deadline SettleGrace after
// the attempt begins: a cancellation ends the attempt when the server
// answers it, SettleGrace after it was sent at the latest, again without
// a goroutine per call to watch ctx (a goroutine that a call hands its
// reply to costs the caller a wake-up, which under load costs more than
// the call). A server that does not answer by then fails the attempt
// with an error that may pass (see Unanswered), though ctx is alive: a
// server slower than SettleGrace would fail every such attempt. So a
// context that Watch marked, as the loop marks its own once an attempt
// went unanswered, gets instead one cancelled SettleGrace after ctx is,
// which backends watch with a goroutine: its attempts wait for the reply
// as long as ctx is alive. A context that can never end is returned as
// is.
func AttemptContext(ctx context.Context) (context.Context, func()) {
	if ctx.Done() == nil {
		return ctx, nop
	}
	if d, ok := ctx.Deadline(); ok {
		return &DeadlineOnly{Context: ctx, Until: d.Add(SettleGrace)}, nop
	}
	if ctx.Value(watchKey{}) == nil {
		return &DeadlineOnly{Context: ctx, Until: time.Now().Add(SettleGrace)}, nop
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu       sync.Mutex
		grace    *time.Timer
		released bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		if !released {
			grace = time.AfterFunc(SettleGrace, cancel)
		}
		mu.Unlock()
	})
	return actx, func() {
		stop()
		mu.Lock()
		released = true
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// watchKey marks a context whose attempts AttemptContext does not cut off
// while it is alive (see Watch).
type watchKey struct{}

// Watch returns ctx marked so that AttemptContext gives its attempts a
// context that ends SettleGrace after ctx does, not SettleGrace after the
// attempt is sent: for an operation that cannot try again (one attempt,
// or one whose attempts are not idempotent), or for the attempts after
// one that the server did not answer in time (see IsUnanswered). It costs
// each attempt a goroutine in the backend, to watch ctx. A ctx that has a
// deadline, or can never end, is returned as is.
func Watch(ctx context.Context) context.Context {
	if ctx.Done() == nil || ctx.Value(watchKey{}) != nil {
		return ctx
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx
	}
	return context.WithValue(ctx, watchKey{}, true)
}

// IsUnanswered reports whether err is an attempt's error that Unanswered
// made one that may pass: the server did not answer within the bound
// that AttemptContext gave the attempt, with ctx alive.
func IsUnanswered(err error) bool { return errors.Is(err, errUnanswered) }

// errUnanswered is the error, which may pass, of an attempt that the
// server did not answer within the bound that AttemptContext gave it.
var errUnanswered = errors.New("the server did not answer the attempt")

// Unanswered returns err, the error of an attempt made with the context
// that AttemptContext(ctx) returned, as one that may pass (see Transient)
// when it is that context's own bound that expired: ctx has no deadline
// and has not ended. Otherwise it returns err as is.
func Unanswered(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || ctx.Done() == nil || ctx.Err() != nil {
		return err
	}
	if _, ok := ctx.Deadline(); ok {
		return err
	}
	return fmt.Errorf("%w within %v: %v", errUnanswered, SettleGrace, err)
}

func nop() {}

// DeadlineOnly is a context that is never cancelled but has a deadline,
// past which a backend gives up the call; its values are its parent's.
type DeadlineOnly struct {
	context.Context
	Until time.Time
}

func (c *DeadlineOnly) Deadline() (time.Time, bool) { return c.Until, true }
func (c *DeadlineOnly) Done() <-chan struct{}       { return nil }
func (c *DeadlineOnly) Err() error                  { return nil }
