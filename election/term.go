package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/lease"
)

var (
	// errResigned is wrapped, with dsync.ErrNotHeld, in the errors of a
	// term that was resigned.
	errResigned = errors.New("the term was resigned")
	// errLost is wrapped, with dsync.ErrNotHeld, in the errors of a term
	// that was lost.
	errLost = errors.New("the term was lost")
)

// A Term is one candidate's leadership, from the Campaign that won it to
// its end: resigned, lost, or run out. Its methods are safe for concurrent
// use. The zero Term, not made by Campaign, is over: its Done is closed,
// and Proclaim and Resign return an error matching dsync.ErrNotHeld.
type Term struct {
	e *Election
	l *lease.Lease

	// The campaign that won the term, with its arguments, and the hook
	// on its lease's end: the campaign and its term cost one allocation.
	spec core.LockSpec
	args [3]any
	hook lease.EndHook

	resigned atomic.Bool

	mu    sync.Mutex
	value string
	ended bool
	// done, made by the first Done before the end, is closed by it; a
	// term whose Done nobody asks for makes no channel.
	done chan struct{}
	// proclaiming, made by the first Proclaim, orders Proclaims, so that
	// Value is the value of the last one the server applied.
	proclaiming chan struct{}
}

// begin starts the term kept by l.
func (t *Term) begin(l *lease.Lease) {
	t.l = l
	l.Attach(&t.hook, termLapsed, t)
}

// termLapsed is the term's hook on its lease's end (see lapsed).
func termLapsed(t any, lost bool, reason string) { t.(*Term).lapsed(lost, reason) }

// lapsed ends the term when its lease ends, and, if it was lost rather
// than resigned, has observers told: nobody else may know the term ended
// (its key was deleted, or it ran out with nobody queued). It runs with
// the lease scheduler's lock held (see lease.Attach), so the announcement
// goes out from a goroutine of its own; a resignation, the common end,
// starts none: the release told the observers.
func (t *Term) lapsed(lost bool, _ string) {
	t.end()
	if lost && !t.resigned.Load() {
		go t.announceLapse()
	}
}

// announceLapse tells observers that a lost term ended.
func (t *Term) announceLapse() {
	ctx, cancel := context.WithTimeout(context.Background(), core.ReleaseTimeout)
	defer cancel()
	e := t.e
	if _, err := e.h.B.Eval(ctx, announceScript, e.keys, e.observe, core.Ms(e.h.Cfg.FenceTTL), e.wake); err != nil {
		e.h.Cfg.Logger.Debug("dsync: could not announce the end of a lost term", "name", e.h.Name, "error", err)
	}
}

func (t *Term) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended {
		t.ended = true
		if t.done != nil {
			close(t.done)
		}
	}
}

// errZero is the error of the zero Term's Token, Proclaim and Resign.
var errZero = fmt.Errorf("election: %w: the zero Term; Campaign makes terms", dsync.ErrNotHeld)

// closed is the Done of the zero Term.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Done returns a channel that is closed when the term ends: when Resign
// is called, when the term is lost (its key vanished, it was taken by
// ForceResign, or renewals failed until the lease ran out), or, on a fixed
// lease, a margin before it runs out on the server (see
// WithExpiryMargin). The next leader cannot begin before Done is closed,
// unless this process is paused past the margin: pass Token with every
// write that only the leader may make.
func (t *Term) Done() <-chan struct{} {
	if t.e == nil {
		return closed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done == nil {
		if t.ended {
			return closed
		}
		t.done = make(chan struct{})
	}
	return t.done
}

// Token returns the term's fencing token: strictly greater than the token
// of every earlier term of the election, whoever led it. A term taken by a
// plain campaign (see Campaign) has its token drawn by the first call that
// needs it, Token or a read (Leader, State, an observer's): Token costs
// one round trip then, bounded by ctx; otherwise it does no I/O. A term
// that ended before its token was drawn never has one: Token returns an
// error matching dsync.ErrNotHeld, as it does for the zero Term; if the
// server says the term is over, the term ends (Done closes).
func (t *Term) Token(ctx context.Context) (int64, error) {
	e := t.e
	if e == nil {
		return 0, errZero
	}
	if tok := t.l.Token(); tok > 0 {
		return tok, nil
	}
	if err := e.h.Begin("token", ctx); err != nil {
		return 0, err
	}
	if err := t.over(); err != nil {
		return 0, e.h.Wrap("token", err)
	}
	tok, err := e.h.LeaseToken(ctx, t.l, &e.hold)
	if errors.Is(err, dsync.ErrNotHeld) && !t.resigned.Load() {
		e.h.LoseHold(t.l.ID(), "term no longer on the server")
	}
	return tok, err
}

// Value returns the leader's value: the one it campaigned with, or that
// of the last Proclaim that succeeded.
func (t *Term) Value() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value
}

// Proclaim changes the leader's value while the term is on, as Leader
// and observers report it. It returns an error matching dsync.ErrNotHeld
// if the term is over (without I/O if this process knows it already; the
// term then ends, and Done closes, if the server says so). If ctx ends
// first the error matches ctx.Err(), and the value may have changed all
// the same. Proclaims of one term are applied one at a time, in the order
// they are called.
func (t *Term) Proclaim(ctx context.Context, value string) error {
	e := t.e
	if e == nil {
		return errZero
	}
	if err := e.h.Begin("proclaim", ctx); err != nil {
		return err
	}
	t.mu.Lock()
	if t.proclaiming == nil {
		t.proclaiming = make(chan struct{}, 1)
	}
	proclaiming := t.proclaiming
	t.mu.Unlock()
	select {
	case proclaiming <- struct{}{}:
		defer func() { <-proclaiming }()
	case <-ctx.Done():
		return e.h.Wrap("proclaim", ctx.Err())
	}
	if err := t.over(); err != nil {
		return e.h.Wrap("proclaim", err)
	}
	reply, err := e.h.B.Eval(ctx, proclaimScript, e.keys, t.l.Owner(), t.l.ID(), value, e.observe, core.Ms(e.h.Cfg.FenceTTL))
	if err != nil {
		return e.h.Wrap("proclaim", err)
	}
	n, err := backend.Int(reply)
	if err != nil {
		return e.h.Wrap("proclaim", err)
	}
	if n == 0 {
		if t.resigned.Load() {
			// Resigned while the Proclaim was on its way.
			return e.h.Wrap("proclaim", fmt.Errorf("%w: %w", dsync.ErrNotHeld, errResigned))
		}
		e.h.LoseHold(t.l.ID(), "term no longer on the server")
		return e.h.Wrap("proclaim", fmt.Errorf("%w: %w", dsync.ErrNotHeld, errLost))
	}
	t.mu.Lock()
	t.value = value
	t.mu.Unlock()
	return nil
}

// over returns the error of a term known to be over, or nil.
func (t *Term) over() error {
	switch {
	case t.resigned.Load():
		return fmt.Errorf("%w: %w", dsync.ErrNotHeld, errResigned)
	case t.l.Ended():
		return fmt.Errorf("%w: %w", dsync.ErrNotHeld, errLost)
	}
	return nil
}

// Resign ends the term and hands leadership to the next candidate in the
// same server call, which wakes it by pub/sub at once; with nobody queued
// the election lapses. Done is closed before the call is sent, so the
// next leader cannot begin while Done is open.
//
// Resign does not depend on ctx's cancellation: with a ctx that has ended
// it still resigns, bounded by a few seconds of its own and by the term's
// lease. The call returns by ctx's deadline plus 100ms (see the package
// dsync documentation): if the outcome is not known by then, the error
// matches ctx.Err() and the resignation goes on in the background; if it
// fails, the term runs out by itself within its lease. A term resigned
// already, or lost, returns an error matching dsync.ErrNotHeld; a term
// that ran out less than the expiry margin ago is still handed on, and
// the error says it was lost.
func (t *Term) Resign(ctx context.Context) error {
	e := t.e
	if e == nil {
		return errZero
	}
	if err := e.h.Check(); err != nil {
		return err
	}
	if !t.resigned.CompareAndSwap(false, true) {
		return e.h.Wrap("resign", fmt.Errorf("%w: %w", dsync.ErrNotHeld, errResigned))
	}
	lost := t.l.Lost()
	t.end()
	if !t.l.Releasable() {
		return e.h.Wrap("resign", fmt.Errorf("%w: %w", dsync.ErrNotHeld, errLost))
	}
	_, err := e.h.ReleaseHold(ctx, t.l, 1, &e.release)
	if err == nil && lost {
		err = fmt.Errorf("%w: %w", dsync.ErrNotHeld, errLost)
	}
	return e.h.Wrap("resign", err)
}
