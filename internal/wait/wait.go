// Package wait is the acquisition loop every blocking primitive shares:
// try, and while that fails, wait for a wake-up on the primitive's channel,
// for the current holder's lease to run out, or for the waiter's heartbeat,
// whichever comes first, then try again.
//
// The first attempt goes straight to the server, so an uncontended
// acquisition costs one round trip. When it fails, the waiter joins the
// channel (a subscription shared by the process) and tries once more before
// sleeping, because a release may have been announced before the
// subscription existed. Failed attempts register the waiter on the server
// so that a release can wake it; the heartbeat renews that registration.
//
// Transient backend errors (connection failures, a loading or failing-over
// server) are ridden out with capped, jittered backoff until ctx is done.
// Permanent ones (a closed backend, a script error, an unexpected reply)
// end the wait at once.
package wait

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
)

// Attempt makes one try. A failed try registers the waiter on the server
// under a.Address, unless that is empty (the waiter has not joined the
// channel yet, and will try again once it has). retryIn is how long the
// current holder's claim lasts, if known, and negative when unknown.
type Attempt func(ctx context.Context, a Try) (acquired bool, retryIn time.Duration, err error)

// Try describes an attempt.
type Try struct {
	Address string // the waiter's address (see hub), or ""
	Prior   int    // attempts made before by the same acquisition
}

// Spec describes one acquisition.
type Spec struct {
	Backend   backend.Backend
	Channel   string
	WaiterID  string
	Heartbeat time.Duration // longest sleep between attempts
	Try       Attempt

	// Granted, if set, is called when a wake-up carries a hand-off (see
	// hub.Waiter.Grant): the script that released the primitive gave it
	// to this waiter. since is when the last attempt that failed with a
	// reply (not an error) was sent: the server handled that attempt
	// before the hand-off, or it would have succeeded, so the hold began
	// after since. Granted reports whether the acquisition is complete.
	// If not, the loop tries again, and the attempt finds the primitive
	// already held for it.
	Granted func(grant string, since time.Time) bool

	// Abandon undoes whatever the attempts may have left on the server
	// (a registration, or an acquisition whose reply was lost). It runs
	// when the acquisition fails, on a context of its own.
	Abandon func(ctx context.Context) error
}

// SettleGrace is how long an attempt still in flight when its context
// ends may take to answer before it is cut off (see Detach).
const SettleGrace = 500 * time.Millisecond

// Detach returns the context for an attempt on ctx's behalf. A script
// that was sent runs on the server whether or not its caller waits for
// the reply, possibly after a clean-up sent on another connection meant
// to undo it; waiting for the reply orders the two. So the returned
// context ends SettleGrace after ctx does, not with it, and the caller
// learns the attempt's result unless the server takes longer than that.
// A context that can never end is returned as is. The caller must call
// release when the attempt is over.
func Detach(ctx context.Context) (actx context.Context, release func()) {
	if ctx.Done() == nil {
		return ctx, func() {}
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

// AbandonTimeout bounds the clean-up after a failed acquisition.
const AbandonTimeout = 5 * time.Second

// Acquire runs the loop until an attempt succeeds, ctx is done, or a
// permanent error occurs. A ctx error is returned as is when no backend
// error preceded it, else wrapped together with the last backend error.
func Acquire(ctx context.Context, s Spec) (err error) {
	defer func() {
		if err != nil && s.Abandon != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AbandonTimeout)
			s.Abandon(actx)
			cancel()
		}
	}()

	var lastErr error
	failures := 0
	// fail decides what an error means: stop now, or back off and retry.
	fail := func(err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return ctxError(cerr, lastErr)
		}
		if !Transient(err) {
			return err
		}
		lastErr = err
		failures++
		if !Sleep(ctx, Backoff(failures)) {
			return ctxError(ctx.Err(), lastErr)
		}
		return nil
	}

	attempts := 0
	// sent is when the latest attempt was sent, and refused when the
	// latest one that failed with a reply was.
	var sent, refused time.Time
	w := hub.Joined(s.Backend, s.Channel, s.WaiterID)
	try := func() (bool, time.Duration, error) {
		a := Try{Prior: attempts}
		if w != nil {
			a.Address = w.Address()
		}
		attempts++
		sent = time.Now()
		return s.Try(ctx, a)
	}
	defer func() {
		if w != nil {
			w.Leave()
		}
	}()
	// The timer is made by the first sleep: an uncontended acquisition,
	// whose first attempt succeeds, never needs one.
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ok, retryIn, err := try()
		if ok {
			return nil
		}
		if err != nil {
			if err := fail(err); err != nil {
				return err
			}
			continue
		}
		failures = 0
		refused = sent
		if w == nil {
			// Join, then try again at once: a release may have been
			// announced before the subscription existed.
			if w, err = hub.Join(ctx, s.Backend, s.Channel, s.WaiterID); err != nil {
				if err := fail(err); err != nil {
					return err
				}
			}
			continue
		}
		sleep := s.Heartbeat
		if retryIn >= 0 && retryIn < sleep {
			sleep = retryIn + time.Millisecond // the server's expiry, then ours
		}
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-w.C():
			timer.Stop()
			if g := w.Grant(); g != "" && s.Granted != nil && s.Granted(g, refused) {
				return nil
			}
		case <-timer.C:
		case <-ctx.Done():
			return ctxError(ctx.Err(), lastErr)
		}
	}
}

func ctxError(cerr, last error) error {
	if last == nil {
		return cerr
	}
	return fmt.Errorf("%w (last backend error: %v)", cerr, last)
}

// Transient reports whether err is worth retrying: a failure to reach the
// server or a server state that passes (LOADING, BUSY, TRYAGAIN, a
// failover), as opposed to a closed backend, a context error, bad input, a
// script error or an unexpected reply.
func Transient(err error) bool {
	var se *backend.ServerError
	switch {
	case err == nil,
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, dsync.ErrClosed),
		errors.Is(err, dsync.ErrUnexpectedReply),
		errors.Is(err, dsync.ErrInvalidBackend):
		return false
	case errors.As(err, &se):
		switch se.Prefix() {
		case "LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN", "READONLY", "NOREPLICAS", "NOSCRIPT", "OOM":
			return true
		}
		return false
	}
	return true
}

// Backoff returns the pause after the n-th consecutive failure (n >= 1):
// exponential from 10ms, capped at 1s, with jitter.
func Backoff(n int) time.Duration {
	d := 10 * time.Millisecond << min(n-1, 7)
	d = min(d, time.Second)
	return d/2 + rand.N(d/2+1)
}

// Sleep pauses for d, or until ctx is done, in which case it reports false.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Handed describes a hand-off to a waiter of this process.
type Handed struct {
	Address string          // the waiter's address (see hub)
	Backend backend.Backend // the backend of the waiter's hub
	Owner   string          // whom it was handed to, if the script says
}

// HandOff runs a script that may hand a primitive to a waiter, and returns
// the first element of its reply: {n}, or {n, waiter address, grant} with
// the new holder's id as an optional fourth element. A script publishes
// only to waiters of other processes (see hub.Process), so HandOff wakes
// a waiter of this process with its grant (hub.Deliver).
// If handed is not nil, it is told of such a waiter before the waiter is
// woken, and told again, with gone true, if the waiter had left. When the
// call fails, the script may still have run, handing the primitive to a
// waiter here whom no one would wake: every waiter on channel in this
// process is woken to try again. As with an attempt, the reply is awaited
// for SettleGrace after ctx ends.
func HandOff(ctx context.Context, b backend.Backend, channel string, s *backend.Script, handed func(to Handed, gone bool), keys []string, args ...any) (int64, error) {
	// A hand-off whose reply went unread would leave its waiter here
	// unwoken (see Detach).
	actx, release := Detach(ctx)
	reply, err := b.Eval(actx, s, keys, args...)
	release()
	if err != nil {
		hub.WakeLocal(channel)
		return 0, err
	}
	r, err := backend.Array(reply, 1)
	if err != nil {
		return 0, err
	}
	n, err := backend.Int(r[0])
	if err != nil {
		return 0, err
	}
	if len(r) >= 3 {
		address, err1 := backend.String(r[1])
		grant, err2 := backend.String(r[2])
		if err := errors.Join(err1, err2); err != nil {
			return 0, err
		}
		to := Handed{Address: address, Backend: hub.Backend(address)}
		if len(r) >= 4 {
			to.Owner, _ = backend.String(r[3])
		}
		if handed != nil && to.Backend != nil {
			handed(to, false)
		}
		if !hub.Deliver(channel, address, grant) && handed != nil && to.Backend != nil {
			handed(to, true)
		}
	}
	return n, nil
}
