package election

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/session"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Observe returns a channel that receives the election's leader: the
// current one at once, if a term is on, then every change, in the order
// the server made them: a new leader, a new value (Proclaim), and the
// zero Leader when the election lapses (a term ends with no candidate
// queued). Changes are pushed by pub/sub as the scripts that make them
// run, and a term taken by a plain campaign (see Campaign) is read when
// its hint arrives: one that ends before that read is not seen; a term
// that runs out with nobody to announce it (its leader's
// process died, with nobody queued) is seen when its lease ends on the
// server, by a read then. Two states in a row that observers cannot tell
// apart (a Proclaim of the same value) are one.
//
// Every observer of the election through one backend value shares one
// subscription, and so one pub/sub connection however many observe.
// After a broken connection the observers re-read the state, so they may
// miss states the server went through meanwhile, never the latest. An
// observer that has not received a state when the next arrives finds only
// the newer one on the channel: it may skip states, but never receives a
// state older than one it received.
//
// The channel is closed when ctx ends, and no goroutine is left for the
// observer; also when the backend is closed, and at once if ctx has ended
// or the handle is invalid (see New). Observe with a ctx that never ends
// observes for the life of the process.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	c := make(chan Leader, 1)
	if err := e.h.Begin("observe", ctx); err != nil {
		if ctx.Err() == nil && e.h.Cfg.Logger != nil { // nil: the zero Election
			e.h.Cfg.Logger.Warn("dsync: cannot observe", "name", e.h.Name, "error", err)
		}
		close(c)
		return c
	}
	o := &observer{c: c}
	f := join(e, o)
	context.AfterFunc(ctx, func() { f.leave(o) })
	return c
}

// observer is one Observe's channel.
type observer struct{ c chan Leader }

// send puts l on the channel, replacing a state the observer has not
// received: only the feed sends, with its lock held, so the channel
// has room once emptied.
func (o *observer) send(l Leader) {
	select {
	case o.c <- l:
		return
	default:
	}
	select {
	case <-o.c:
	default:
	}
	o.c <- l
}

// A feed is the subscription of one backend value to one election's
// changes, which it fans out to that election's observers there. It is
// made by the first Observe, kept by the backend value's session (package
// session) while it has observers, and ends when its last observer
// leaves. It subscribes the election's observe channel itself rather than
// through the session's hub, which subscribes a channel per session for
// wake-ups addressed to it: a change is addressed to everyone.
type feed struct {
	key    string           // its key in the session
	sess   *session.Session // which keeps it
	e      *Election        // the handle of the first observer, for reads
	cancel context.CancelFunc
	// callTimeout bounds each call it makes.
	callTimeout time.Duration

	mu        sync.Mutex
	observers map[*observer]struct{}
	cur       Leader // the latest state, as observers were told

	// Owned by run.
	ver      int64     // of the latest state accepted; -1 before the first
	expires  time.Time // when the current term runs out, if it does
	failing  error     // the failure last logged (see unreachable), until a call succeeds or refresh gives up
	loggedAt time.Time // when it was
}

// join adds o to the feed of e's election on e's backend, started if
// there is none, and sends o the current leader if the feed knows it.
func join(e *Election, o *observer) *feed {
	key := "election-feed:" + e.observe
	for {
		sess := e.h.Session()
		v, ok := sess.Attach(key, func() any {
			ctx, cancel := context.WithCancel(context.Background())
			f := &feed{key: key, sess: sess, e: e, cancel: cancel, callTimeout: callTimeout, observers: make(map[*observer]struct{}), ver: -1}
			go f.run(ctx)
			return f
		})
		if !ok {
			continue // the session retired meanwhile
		}
		f := v.(*feed)
		f.mu.Lock()
		if f.observers == nil {
			// Closed already (see close): o finds its channel closed.
			f.mu.Unlock()
			f.sess.Detach(key, f)
			close(o.c)
			return f
		}
		f.observers[o] = struct{}{}
		if !f.cur.IsZero() {
			o.send(f.cur)
		}
		f.mu.Unlock()
		return f
	}
}

// leave closes o's channel, and ends the feed if o was its last observer.
func (f *feed) leave(o *observer) {
	f.mu.Lock()
	_, ok := f.observers[o]
	if ok {
		delete(f.observers, o)
		close(o.c)
	}
	f.mu.Unlock()
	if ok && f.sess.Detach(f.key, f) {
		f.cancel()
	}
}

// close ends the feed for its observers: their channels are closed, and
// the session forgets it.
func (f *feed) close() {
	f.sess.Forget(f.key, f)
	f.mu.Lock()
	for o := range f.observers {
		close(o.c)
	}
	f.observers = nil
	f.mu.Unlock()
}

// expirySlack is how long after a term's expiry on the server, as its
// last reported lease says, the feed reads the state: the server expires
// the key when a read finds it past its time.
const expirySlack = 5 * time.Millisecond

// run subscribes, reads the state, and applies every change announced,
// until ctx ends (the last observer left) or the backend is closed.
// It reads the state again after a gap, when the subscription had to be
// made again, and when the current term should have run out.
func (f *feed) run(ctx context.Context) {
	defer f.cancel()
	var sub backend.Subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	for {
		if sub == nil {
			if sub = f.subscribe(ctx); sub == nil {
				f.close()
				return
			}
			f.refresh(ctx, true)
		}
		rctx, cancel := ctx, context.CancelFunc(nil)
		if !f.expires.IsZero() {
			rctx, cancel = context.WithDeadline(ctx, f.expires)
		}
		m, err := sub.Receive(rctx)
		if cancel != nil {
			cancel()
		}
		switch {
		case ctx.Err() != nil:
			f.close()
			return
		case err == nil && m.Gap:
			f.refresh(ctx, true)
		case err == nil:
			if o, ok := parseMessage(m.Payload); ok {
				f.apply(o, false)
			} else {
				f.refresh(ctx, false)
			}
		case errors.Is(err, context.DeadlineExceeded):
			f.expires = time.Time{}
			f.refresh(ctx, false)
		default:
			// Closed with its backend, or broken: subscribe again,
			// which fails for good on a closed backend.
			sub.Close()
			sub = nil
		}
	}
}

// subscribe subscribes the feed's channel, retrying errors that may pass
// with capped backoff, and returns nil when ctx ends or the backend is
// closed.
func (f *feed) subscribe(ctx context.Context) backend.Subscription {
	for n := 1; ; n++ {
		sctx, cancel := context.WithTimeout(ctx, f.callTimeout)
		sub, err := f.e.h.B.Subscribe(sctx, f.e.observe)
		cancel()
		switch {
		case err == nil:
			f.reached()
			return sub
		case ctx.Err() != nil, errors.Is(err, dsync.ErrClosed):
			return nil
		}
		f.unreachable(n, err)
		if !wait.Sleep(ctx, wait.Backoff(n)) {
			return nil
		}
	}
}

// callTimeout bounds each call a feed makes (a variable for the tests:
// a feed keeps the value it started with).
var callTimeout = 10 * time.Second

// refresh reads the state and applies it (see apply for reset),
// retrying errors that may pass with capped backoff until ctx ends: a
// failure to reach the server, a read that ran past callTimeout, and the
// server's refusal of the read. Through a user that may not write, or on
// a replica, a read of a term that nothing read yet is refused (it would
// convert the term, see Keys in the package doc) until something that may
// write has read it, such as its leader's Token or first renewal, and
// then the read shows it. An error that cannot pass (a key dsync did not
// write) is logged, and the next change or gap tries again.
func (f *feed) refresh(ctx context.Context, reset bool) {
	for n := 1; ; n++ {
		rctx, cancel := context.WithTimeout(ctx, f.callTimeout)
		o, _, err := f.e.read(rctx, 0)
		cancel()
		var refused *backend.ServerError
		switch {
		case err == nil:
			f.reached()
			f.apply(o, reset)
			return
		case ctx.Err() != nil, errors.Is(err, dsync.ErrClosed):
			return
		case errors.Is(err, context.DeadlineExceeded):
			// The read's own bound passed, not ctx: the server did not
			// answer in time (stalled, or a client timeout no shorter
			// than the bound), which passes as a broken connection does.
		case !wait.Transient(err) && (!errors.As(err, &refused) || core.Foreign(err)):
			// The end of the failures retried: what comes next, even the
			// same failure again, is logged anew.
			f.failing = nil
			f.e.h.Cfg.Logger.Warn("dsync: cannot read the election's leader", "name", f.e.h.Name, "error", err)
			return
		}
		f.unreachable(n, err)
		if !wait.Sleep(ctx, wait.Backoff(n)) {
			return
		}
	}
}

// remindAfter is how long after it was last logged a failure to observe
// that goes on is logged again.
const remindAfter = time.Minute

// unreachable logs the n-th failure in a row to reach the server, or the
// server's refusal, where it tells something new: the first of a run, one
// of another cause than the one last logged, and one that comes
// remindAfter or more after the last logged, so that a failure that does
// not pass (a refusal for good, say) keeps showing in the log, however
// long each attempt takes. reached logs the run's end.
func (f *feed) unreachable(n int, err error) {
	now := time.Now()
	if f.failing != nil && cause(err) == cause(f.failing) && now.Sub(f.loggedAt) < remindAfter {
		return
	}
	f.failing, f.loggedAt = err, now
	msg := "dsync: cannot reach the server to observe the election; retrying"
	var refused *backend.ServerError
	if errors.As(err, &refused) {
		msg = "dsync: the server refused a call to observe the election; retrying"
	}
	f.e.h.Cfg.Logger.Warn(msg, "name", f.e.h.Name, "error", err, "attempts", n)
}

// cause is what tells one failure from another: err's text, less the
// local address of a connection's error ("read tcp 127.0.0.1:41086->..."),
// which changes with every connection a retry opens, as after a timeout.
func cause(err error) string {
	text := err.Error()
	var op *net.OpError
	if errors.As(err, &op) && op.Source != nil {
		remote := *op
		remote.Source = nil
		text = strings.Replace(text, op.Error(), remote.Error(), 1)
	}
	return text
}

// reached logs, after unreachable logged a failure, that a call succeeded:
// the feed observes the election again.
func (f *feed) reached() {
	if f.failing == nil {
		return
	}
	f.failing = nil
	f.e.h.Cfg.Logger.Info("dsync: observing the election again", "name", f.e.h.Name)
}

// apply makes o the current state if it is newer than the one the feed
// has, and tells the observers if they can tell it apart. A state as new
// as the current one only refreshes when the term runs out.
//
// With reset, o is the state read after the subscription was broken or
// made anew, and is taken whatever its number: the server may have lost
// the election's keys and numbered its states afresh from a clock that is
// behind the numbers seen so far (a restart, a failover), and the read is
// the current state. Otherwise the read is no older than any message
// published before it ran, which arrive later only with smaller numbers.
func (f *feed) apply(o observed, reset bool) {
	if reset && o.ver < f.ver {
		f.ver = -1
	}
	if o.ver < f.ver {
		return
	}
	f.expires = time.Time{}
	if !o.leader.IsZero() && o.ttl >= 0 {
		f.expires = time.Now().Add(o.ttl + expirySlack)
	}
	if o.ver == f.ver {
		return
	}
	f.ver = o.ver
	f.mu.Lock()
	defer f.mu.Unlock()
	if o.leader == f.cur {
		return
	}
	f.cur = o.leader
	for ob := range f.observers {
		ob.send(o.leader)
	}
}

// parseMessage decodes a change as scripts publish it (see lua/term.lua).
func parseMessage(payload string) (observed, bool) {
	parts := strings.SplitN(payload, " ", 6)
	if len(parts) != 6 {
		return observed{}, false
	}
	f := make([]any, 6)
	for i, p := range parts {
		f[i] = p
	}
	o, err := parseObserved(f)
	return o, err == nil
}
