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
// server) are ridden out with capped, jittered backoff until ctx is done,
// unless ctx says to fail fast (see FailFast). Permanent ones (a closed
// backend, a script error, an unexpected reply) end the wait at once.
package wait

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/observe"
)

// Acquirer is what the loop asks of an acquisition.
type Acquirer interface {
	// Hub returns the hub of the acquisition's session: the same one
	// unless the session retired, which it cannot while a waiter is
	// joined.
	Hub() *hub.Hub

	// Try makes one attempt. A failed attempt registers the waiter on
	// the server under t.Address, unless that is empty (the waiter has
	// not joined the channel yet, and will try again once it has).
	Try(ctx context.Context, t Try) (Result, error)

	// Granted is called when a wake-up carries a hand-off (see
	// hub.Waiter.Grant): the script that released the primitive gave it
	// to this waiter, with the fencing token that the grant starts with
	// (its first word, in decimal). It is called only for a grant newer
	// than the hold the latest failed attempt found: that attempt, sent
	// at since, replied with a token (not 0), and the grant's is above it
	// and every other token a failed attempt saw. The server then handled
	// the attempt before the hand-off, so the hold began after since.
	// Other grants (a wake-up delayed past the hold's expiry, or one after
	// an attempt that saw no token) are not taken from the wake-up.
	// Granted reports whether the acquisition is complete. If not, or
	// without a call, the loop tries again, and the attempt finds the
	// primitive held for the waiter if the grant still stands.
	Granted(token int64, since time.Time) bool

	// Abandon undoes whatever the attempts may have left on the server
	// (a registration, or an acquisition whose reply was lost). It runs
	// when the acquisition fails, on a context of its own.
	Abandon(ctx context.Context) error
}

// Try describes an attempt.
type Try struct {
	Address string // the waiter's address (see hub), or ""
	Prior   int    // attempts made before by the same acquisition
}

// Result is what an attempt that got a reply learned.
type Result struct {
	Acquired bool

	// RetryIn is how long the current holder's claim lasts, if known, and
	// negative when unknown.
	RetryIn time.Duration

	// Token is the fencing token of the primitive when the attempt
	// failed: the current holder's, or the last one handed out; 0 if the
	// server does not know it (the key of a hold that expired is gone).
	// It must be at least every token handed out before the attempt. A
	// grant is taken from a wake-up only if its token is above this one,
	// not 0, and every other one seen (see Acquirer.Granted).
	Token int64
}

// Spec describes one acquisition.
type Spec struct {
	Channel   string
	WaiterID  string
	Heartbeat time.Duration // longest sleep between attempts

	// Logger, if set, hears at Warn when the server cannot be reached,
	// once and then every UnreachableLogEvery, naming Name.
	Logger *slog.Logger
	Name   string

	// Waiting, if set, is called with +1 when the acquisition starts
	// waiting (an attempt found the primitive held), and with -1 when
	// it stops.
	Waiting func(delta int)
}

// UnreachableLogEvery is how often a wait that keeps failing to reach the
// server says so again.
const UnreachableLogEvery = time.Minute

// AbandonTimeout bounds the clean-up after a failed acquisition.
const AbandonTimeout = 5 * time.Second

// CleanupBudget is how long the caller of a failed acquisition waits for
// its clean-up (see Cleanup) before leaving it to finish in the
// background.
const CleanupBudget = 100 * time.Millisecond

// background counts the clean-ups and releases under way in the
// background, for Settle.
var background sync.WaitGroup

// Go runs f in the background: a release that outlived its caller's
// deadline (see Settle).
func Go(f func()) {
	background.Add(1)
	go func() {
		defer background.Done()
		f()
	}()
}

// Cleanup runs f, the clean-up after a failed acquisition, on a context of
// its own bounded by AbandonTimeout, and waits for it at most
// CleanupBudget: on a server that answers, the caller returns with the
// clean-up done; on a stalled one, it returns in time, and the clean-up
// goes on in the background until the server answers or its bound passes.
// Either way the clean-up is not cut short by the caller's return.
func Cleanup(ctx context.Context, f func(ctx context.Context)) {
	done := make(chan struct{})
	background.Add(1)
	go func() {
		defer background.Done()
		defer close(done)
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AbandonTimeout)
		defer cancel()
		f(actx)
	}()
	t := time.NewTimer(CleanupBudget)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// Settle waits for the clean-ups and releases under way in the
// background to end; for tests.
func Settle() { background.Wait() }

// Acquire runs the loop until an attempt succeeds, ctx is done, or a
// permanent error occurs. A ctx error is returned as is when no backend
// error preceded it, else wrapped together with the last backend error.
// A failed acquisition is cleaned up with acq.Abandon through Cleanup.
func Acquire(ctx context.Context, s Spec, acq Acquirer) (err error) {
	defer func() {
		if err != nil {
			Cleanup(ctx, func(ctx context.Context) { acq.Abandon(ctx) })
		}
	}()
	l := loop{ctx: ctx, s: s, acq: acq, w: acq.Hub().Joined(s.Channel, s.WaiterID)}
	defer l.end()
	for {
		r, err := l.try()
		switch {
		case err != nil:
			err = l.fail(err)
		case r.Acquired:
			return nil
		default:
			var granted bool
			granted, err = l.refused(r)
			if granted {
				return nil
			}
		}
		if err != nil {
			return err
		}
	}
}

// loop is the state of one Acquire.
type loop struct {
	ctx context.Context
	s   Spec
	acq Acquirer
	w   *hub.Waiter // joined to the channel, or nil

	// Backend errors in a row: the last, how many, when they began, and
	// when the server's absence was last logged.
	lastErr       error
	failures      int
	since, warned time.Time

	attempts int
	waiting  bool // reported to s.Waiting

	// sent is when the latest attempt was sent, and refusedAt when the
	// latest one that failed with a reply was; last is the token that
	// reply carried, and seen the highest token the failed attempts saw.
	sent, refusedAt time.Time
	last, seen      int64

	// timer is made by the first sleep: an uncontended acquisition, whose
	// first attempt succeeds, never needs one.
	timer *time.Timer
}

// end undoes what the loop holds, when Acquire returns.
func (l *loop) end() {
	if l.waiting {
		l.s.Waiting(-1)
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.w != nil {
		l.w.Leave()
	}
}

// try makes an attempt, under the waiter's address once it has joined.
func (l *loop) try() (Result, error) {
	a := Try{Prior: l.attempts}
	if l.w != nil {
		a.Address = l.w.Address()
	}
	l.attempts++
	l.sent = time.Now()
	return l.acq.Try(l.ctx, a)
}

// watch marks l.ctx (see Watch) once an attempt went unanswered: a server
// slower than SettleGrace would fail each attempt cut off at that bound,
// and the wait would never end while ctx is alive.
func (l *loop) watch(err error) {
	if IsUnanswered(err) {
		l.ctx = Watch(l.ctx)
	}
}

// fail decides what an attempt's error means: stop now (the error to
// return), or back off and retry (nil).
func (l *loop) fail(err error) error {
	if cerr := l.ctx.Err(); cerr != nil {
		return ctxError(cerr, l.lastErr)
	}
	if !Transient(err) || l.ctx.Value(failFastKey{}) != nil {
		return err
	}
	l.watch(err)
	l.lastErr = err
	l.failures++
	now := time.Now()
	if l.failures == 1 {
		l.since = now
	}
	if l.s.Logger != nil && (l.warned.IsZero() || now.Sub(l.warned) >= UnreachableLogEvery) {
		l.warned = now
		l.s.Logger.Warn("dsync: cannot reach the server; retrying", "name", l.s.Name,
			"failing_for", now.Sub(l.since).Round(time.Millisecond), "attempts", l.failures, "error", err)
	}
	if !Sleep(l.ctx, Backoff(l.failures)) {
		return ctxError(l.ctx.Err(), l.lastErr)
	}
	return nil
}

// refused records an attempt that failed with a reply r, and waits for
// the next: at once if the waiter has yet to join the channel, after
// joining it. It reports whether a wake-up's grant completed the
// acquisition, or the error that ends it.
func (l *loop) refused(r Result) (bool, error) {
	l.failures = 0
	l.refusedAt, l.last = l.sent, r.Token
	l.seen = max(l.seen, r.Token)
	if l.s.Waiting != nil && !l.waiting {
		l.s.Waiting(1)
		l.waiting = true // after the call: a -1 follows a +1 that returned
	}
	if l.w == nil {
		return false, l.join()
	}
	return l.park(r.RetryIn)
}

// join joins the channel, after which the loop tries again at once: a
// release may have been announced before the subscription existed. A
// retired hub is joined at the next attempt.
func (l *loop) join() error {
	w, err := l.acq.Hub().Join(l.ctx, l.s.Channel, l.s.WaiterID)
	l.w = w
	if err != nil && !errors.Is(err, hub.ErrRetired) {
		return l.fail(err)
	}
	return nil
}

// park waits for a wake-up, for retryIn (the holder's claim, if known,
// then ours) or the heartbeat, whichever is shorter, or for ctx to end.
// It reports whether a wake-up's grant completed the acquisition.
func (l *loop) park(retryIn time.Duration) (bool, error) {
	sleep := l.s.Heartbeat
	if retryIn >= 0 && retryIn < sleep {
		sleep = retryIn + time.Millisecond // the server's expiry, then ours
	}
	if l.timer == nil {
		l.timer = time.NewTimer(sleep)
	} else {
		l.timer.Reset(sleep)
	}
	select {
	case <-l.w.C():
		l.timer.Stop()
		// A grant is taken from the wake-up only if it is newer than
		// the hold the latest failed attempt found (see
		// Acquirer.Granted). A reply without a token tells nothing: the
		// hand-off may have come before that attempt, its hold expired
		// since (the key gone, with the token), and the attempt queued
		// the waiter again. Any other grant costs an attempt, which finds
		// the hold the waiter's if it still stands, or queues.
		if g := l.w.Grant(); g != "" {
			if token, ok := codec.GrantToken(g); ok && l.last > 0 && token > l.seen && l.acq.Granted(token, l.refusedAt) {
				return true, nil
			}
		}
	case <-l.timer.C:
	case <-l.ctx.Done():
		return false, ctxError(l.ctx.Err(), l.lastErr)
	}
	return false, nil
}

// FailFast returns a context under which an acquisition's wait ends at
// its first backend error, transient or not, rather than ride it out: for
// a caller that can do without what it waits for (RedLock, waiting for
// one member of a majority), to whom a server that has gone away costs the
// wait's bound otherwise.
func FailFast(ctx context.Context) context.Context {
	return context.WithValue(ctx, failFastKey{}, true)
}

type failFastKey struct{}

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

// Reply is the head of the reply of a script that may hand a primitive
// to waiters (see codec.HandOffReply): n and the hold id mean what the
// script says (a release replies with the owner's remaining holds and the
// id of the hold it released).
type Reply struct {
	N      int64
	HoldID string

	// Woke says that the script woke a waiter of another session to try,
	// without handing it the primitive (see pass_on in exclusive.lua).
	Woke bool

	// Refused, set by the caller that decoded it, says that the script
	// changed nothing (a release of more than is held).
	Refused bool
}

// HandOff runs a script that may hand a primitive to waiters through b,
// the backend of the session whose hub is h, and returns the head of its
// Reply. A script publishes only to waiters of other sessions (it is told
// h's id), so HandOff wakes each waiter of h with its grant (Deliver).
// When the call fails, the script may still have run, handing the
// primitive to a waiter here whom no one would wake: every waiter of h on
// channel is woken to try again. ctx bounds the call as it is: a caller
// that must learn the reply after its own context ended passes one that
// has not (see AttemptContext).
func HandOff(ctx context.Context, b backend.Backend, h *hub.Hub, channel string, handed Handed, s *backend.Script, keys []string, args ...any) (Reply, error) {
	reply, err := b.Eval(ctx, s, keys, args...)
	if err != nil {
		h.WakeAll(channel)
		return Reply{}, err
	}
	return Deliver(b, h, channel, handed, reply)
}

// Handed is told of a hand-off to a waiter of the caller's hub: the
// waiter's id, the owner that now holds the primitive and the grant's
// token (0 if it has none); gone says that the waiter had left, and its
// clean-up passes the hold on.
type Handed func(id, owner string, token int64, gone bool)

// Deliver decodes reply (see codec.HandOffReply), wakes the waiters of h
// it names, with their grants, and returns its head. handed, if not nil,
// is told of each hand-off to a waiter of h before the waiter is woken,
// and told again, with gone true, if the waiter had left; a wake-up
// without a grant hands nothing.
func Deliver(b backend.Backend, h *hub.Hub, channel string, handed Handed, reply any) (Reply, error) {
	var buf [1]codec.Handed
	n, id, ws, err := codec.HandOffReply(reply, buf[:0])
	if err != nil {
		h.WakeAll(channel)
		return Reply{}, err
	}
	woke := false
	for _, w := range ws {
		delivered := false
		wid, local := h.Local(w.Address)
		woke = woke || w.Grant == "" && !local
		if local {
			if w.Grant == "" {
				delivered = h.Deliver(channel, wid, "")
			} else {
				token, _ := codec.GrantToken(w.Grant)
				if handed != nil {
					handed(wid, w.Owner, token, false)
				}
				delivered = h.Deliver(channel, wid, w.Grant)
				if !delivered && handed != nil {
					handed(wid, w.Owner, token, true)
				}
			}
		}
		if o := observe.For(b); o != nil && w.Grant != "" {
			o.ReportHandedOff(observe.HandOff{Channel: channel, Local: delivered})
		}
	}
	return Reply{N: n, HoldID: id, Woke: woke}, nil
}
