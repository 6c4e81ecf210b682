package waitgroup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Wait blocks until the group's count is 0, or ctx is done. It returns nil
// at once if the count is 0. A waiter is woken through pub/sub by the
// script that brings the count to 0, and tries again when the earliest
// lease of the units it waits for runs out, and at its heartbeat (a third
// of the waiter timeout): it never polls.
//
// Units abandoned by their owner (its lease ran out: see the package
// documentation) end the wait with an *AbandonedError naming them,
// matching dsync.ErrAbandoned, within a few milliseconds of the lease's
// end on the server; so does every later Wait until the count is 0, unless
// the group keeps abandoned units (WithKeepAbandoned). A wait whose group's
// state vanished with units pending ends with ErrVanished at its next
// attempt. Otherwise the error matches ctx.Err(), or is the backend error
// that cannot pass; transient ones are ridden out.
func (g *WaitGroup) Wait(ctx context.Context) error {
	if err := g.h.Begin("wait", ctx); err != nil {
		return err
	}
	w := &waiter{g: g, op: dsync.NewID()}
	err := wait.Acquire(ctx, wait.Spec{Channel: g.channel, WaiterID: w.op, Heartbeat: g.h.Cfg.WaiterTimeout / 3, Logger: g.h.Cfg.Logger, Name: g.h.Name}, w)
	return g.h.Wrap("wait", scriptError(err))
}

// waiter is one Wait, as the waiting loop (package wait) runs it: its
// attempts register it, and the end of the phase it registered in is
// handed to it as a grant, the phase's generation plus one.
type waiter struct {
	g              *WaitGroup
	op, entry, gen string
}

func (w *waiter) Hub() *hub.Hub { return w.g.h.Session().Hub }

func (w *waiter) Try(ctx context.Context, t wait.Try) (wait.Result, error) {
	if t.Address != "" && w.entry == "" {
		w.entry = codec.EntryOf(t.Address, w.g.owner)
	}
	reply, err := w.g.h.Attempt(ctx, waitScript, w.g.keys, append(w.g.header(w.op, w.entry), w.gen, "0")...)
	r, rerr := codec.AttemptReply(reply, w.op, 0)
	if err = cmp.Or(err, rerr); err != nil || r.Acquired {
		return wait.Result{Acquired: r.Acquired}, err
	}
	if w.entry != "" {
		w.gen = strconv.FormatInt(r.Seen, 10) // registered in that phase
	}
	return wait.Result{RetryIn: r.RetryIn, Token: r.Seen}, nil
}

func (w *waiter) Granted(token int64, _ time.Time) bool {
	return w.gen != "" && strconv.FormatInt(token-1, 10) == w.gen
}

func (w *waiter) Abandon(ctx context.Context) error {
	_, err := w.g.h.B.Eval(ctx, waitScript, w.g.keys, append(w.g.header(w.op, w.entry), w.gen, "1")...)
	return err
}

// State is a snapshot of a wait group on the server.
type State struct {
	Count     int64           // units pending, abandoned ones aside
	Owners    []Owner         // the owners of those units, the earliest lease end first
	Abandoned *AbandonedError // the first abandonment of the units pending, or nil
	Waiters   int             // waiters registered and alive
}

// Owner is an owner's share of a group's count.
type Owner struct {
	Owner string
	Units int64
	Lease time.Duration // left on the server; 0 or less: ended, in a group that keeps abandoned units
}

// State reads the group's state in one round trip. Units whose lease ended
// count as abandoned, whether or not a script has found them yet.
func (g *WaitGroup) State(ctx context.Context) (State, error) {
	if err := g.h.Begin("state", ctx); err != nil {
		return State{}, err
	}
	reply, err := g.h.B.Eval(ctx, inspectScript, g.keys)
	r, rerr := backend.Array(reply, 4)
	if err = cmp.Or(err, rerr); err == nil && (len(r)-4)%3 != 0 {
		err = fmt.Errorf("%w: state reply %v", dsync.ErrUnexpectedReply, reply)
	}
	if err != nil {
		return State{}, g.h.Wrap("state", err)
	}
	var errs []error
	str := func(v any) string { s, err := backend.String(v); errs = append(errs, err); return s }
	num := func(v any) int64 { n, err := backend.Int(v); errs = append(errs, err); return n }
	st := State{Count: num(r[0]), Waiters: int(num(r[3]))}
	if o := str(r[1]); o != "" {
		st.Abandoned = &AbandonedError{o, num(r[2])}
	}
	for i := 4; i < len(r); i += 3 {
		st.Owners = append(st.Owners, Owner{str(r[i]), num(r[i+1]), time.Duration(num(r[i+2])) * time.Millisecond})
	}
	return st, g.h.Wrap("state", errors.Join(errs...))
}
