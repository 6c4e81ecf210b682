package backend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync"
)

// PipelineConfig is what an adapter gives NewPipeline: its client's two
// ways of sending calls, how to classify their errors, and how its client
// bounds a call.
type PipelineConfig struct {
	// Send sends one call, on the calling goroutine, and returns its
	// normalized reply (NormalizeReply) or its error as the client gave
	// it (Wrap classifies it). A script call falls back from EVALSHA to
	// EVAL on NOSCRIPT. ctx can never be cancelled. When Honours is true
	// it has a deadline, which the call must keep (unless Bounded is true
	// too: then it may have none, and the client bounds the call);
	// otherwise it may have one, which the client ignores, and its own
	// read timeout bounds the call (the caller, waiting on its own, keeps
	// the deadline).
	Send func(ctx context.Context, c Call) (any, error)

	// Batch sends calls at once, on one connection (or one per node of a
	// cluster), with EVALSHA, or EVAL when source is true, and returns one
	// Result per call, in order, or an error for the whole batch: the
	// pipeline of PipelineBatch, whose contract it keeps. A Result's Err
	// is a *ServerError, an error matching dsync.ErrUnexpectedReply for a
	// reply the client cannot normalize (that call's alone: the others of
	// a batch may be other callers'), or nil. ctx is as for Send. Like
	// Send, it runs on the calling goroutine and is done with calls when
	// it returns, whatever it returns: the Pipeline reuses the slice for
	// its next batch.
	Batch func(ctx context.Context, calls []Call, source bool) ([]Result, error)

	// Wrap classifies an error of Send, or of a Batch as a whole, for a
	// caller whose context is ctx: an error reply becomes a *ServerError,
	// a closed client ErrClosed, and anything else a transport error
	// (TransportError, given ctx). The default is TransportError with the
	// prefix "backend". A *ServerError never reaches it.
	Wrap func(ctx context.Context, err error) error

	// Honours reports that the client sets socket deadlines from a
	// context's deadline (see CallContext).
	Honours bool

	// Bounded reports that the client bounds a call by itself when its
	// context has no deadline (rueidis: its connections' write timeout
	// and health checks), so that, with Honours, such a call whose
	// context can never be cancelled is sent on its caller's goroutine as
	// it is, rather than with a deadline Timeout away (an EvalBatch sent
	// on its caller's goroutine too: Timeout does not bound it then).
	Bounded bool

	// Timeout bounds a call that nothing else bounds (see CallTimeout),
	// and every batch. The default is 10s.
	Timeout time.Duration

	// Conns is how many round trips may be in flight at once: calls sent
	// on their callers' goroutines and batches. The default, 1, sends the
	// calls in the order they queued; more let a batch be written while
	// the replies of another are read (each on a connection of its own,
	// as the redigo adapter sends two over a pool that keeps them idle,
	// which gains under load), and keep only the order of calls made one
	// after another (see Pipeline).
	Conns int

	// Off turns sharing off: every call is sent on its own, on its
	// caller's goroutine when its context allows (see CallContext), on a
	// goroutine of its own otherwise, as without a Pipeline. It is the
	// shipped adapters' WithPipelining(false).
	Off bool

	// Check, if set, is called first by every call, before any I/O: an
	// adapter's own refusals (a missing client, a closed backend), and
	// ctx.Err(), which is checked where Check is not set.
	Check func(ctx context.Context) error
}

// maxBatch bounds the entries of the queue sent in one batch: calls, or
// the pairs of SetNXPublish, which count as one so as never to be split.
const maxBatch = 512

// Pipeline is the calling half of a backend for a client that does not
// pipeline by itself, written once for every adapter as Mux is the pub/sub
// half: concurrent calls through one backend share round trips. An
// adapter's Eval calls Do, its SetNX and SetNXPublish (Setter and
// SetPublisher) the Pipeline's, and its Close calls Close.
//
// Calls are batched naturally: while a round trip is on the wire, new
// calls queue; as soon as it returns, every call queued meanwhile goes out
// as the next batch, written at once and read in order, each reply to its
// own caller. A batch therefore grows with the load and costs nothing to
// wait for: no timer, no minimum size. A call made while nothing is in
// flight or queued is sent on the caller's goroutine, as without a
// Pipeline, when its context allows (CallContext: one that can never be
// cancelled, with a deadline the client honours or no deadline); so a
// lone caller pays two uncontended mutex operations and no hand-off.
// Other calls, and all calls under load, are sent by a goroutine of the
// Pipeline, which lives while there is a queue and exits when there is
// none.
//
// The Pipeline also keeps calls made one after another in order, which a
// pool of connections does not: a call made after another's caller
// returned runs after that one, if it runs at all (it is not sent if its
// caller left before it was). dsync relies on it where a caller that gives
// up withdraws what its abandoned call may have done: the withdrawal
// cannot overtake the call. With one round trip at a time (Conns 1, the
// default) the server runs the calls in the order they queued. With more,
// calls in flight together may run in any order, and a caller that leaves
// a call on the wire holds back every call made after it, until that
// round trip has returned. (On a cluster, the order holds per node.)
//
// What the Pipeline keeps of the package's rules (7, 8 and 10):
//
//   - A caller waits for its reply until its context ends, and then
//     returns an error matching ctx.Err() at once, whether or not its
//     call was written; a call whose caller has gone is not sent if it was
//     not yet, and its reply, if it was, is read and dropped, so that no
//     other caller's reply shifts. A context that can never be cancelled
//     but has a deadline costs the waiting caller a timer, no goroutine.
//   - A batch runs detached from its callers' contexts, bounded by the
//     latest of their deadlines and by Timeout, whichever comes first.
//   - A batch that fails as a whole (the connection was closed or reset,
//     or timed out) fails every call in it with Wrap's error for each
//     caller: a transport error, which dsync retries, unless the caller's
//     own context ended. The next batch takes another connection from the
//     client, which replaces the broken one as it does for any call.
//   - Close fails the calls still queued with ErrClosed, waits for the
//     batches on the wire, and leaves no goroutine behind; later calls
//     fail with ErrClosed. The client stays the caller's.
//
// Off turns the sharing off: each call then goes alone, on its caller's
// goroutine or on one of its own (which is what the shipped adapters did
// before, and what Calls does), and the order of calls made one after
// another is given up with it, as a pool of connections gives it up.
type Pipeline struct {
	cfg PipelineConfig

	mu     sync.Mutex
	closed bool
	busy   int        // round trips in flight, at most cfg.Conns
	queue  []*pending // calls waiting for a batch

	// The order of calls made one after another, which more than one
	// round trip in flight (Conns) could break where a caller leaves a
	// call on the wire: each batch is numbered when taken (seq), flying
	// holds the numbers of those on the wire, and a caller that leaves a
	// call on the wire raises barrier to its batch's number. While a
	// batch numbered up to barrier flies, no batch is taken and no call
	// is sent on its caller's goroutine (see blockedLocked); landed is
	// broadcast when a batch lands while a barrier stands. An EvalBatch
	// sent on a goroutine of its own is numbered as a batch is (runOne).
	seq     uint64
	flying  []uint64
	barrier uint64
	landed  sync.Cond

	goroutines sync.WaitGroup

	// pendings reuses the calls' records, each with its channel and
	// timer: one pool per Pipeline, whose calls come from the goroutines
	// of one program (or of one testing/synctest bubble, whose channels
	// and timers no other may touch).
	pendings sync.Pool

	// pairs reuses SetNXPublish's calls and their lines: one of them is
	// reused once the batch that sent it is done with it.
	pairs sync.Pool

	// The keys of calls, and the PX of SetNX, boxed once for the calls
	// that repeat them: those of one handle.
	boxes *boxes
	px    lastInt
}

// NewPipeline returns a Pipeline that sends calls as cfg says.
func NewPipeline(cfg PipelineConfig) *Pipeline {
	if cfg.Wrap == nil {
		cfg.Wrap = func(ctx context.Context, err error) error { return TransportError(ctx, "backend", err) }
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Conns <= 0 {
		cfg.Conns = 1
	}
	p := &Pipeline{cfg: cfg, boxes: newBoxes()}
	p.landed.L = &p.mu
	p.pendings.New = func() any { return &pending{done: make(chan struct{}, 1)} }
	p.pairs.New = func() any { return new(setPublish) }
	return p
}

// pending is one call from the moment it is queued until its caller has
// its reply or has gone.
type pending struct {
	call     Call
	batch    []Call    // instead of call, for EvalBatch and SetNXPublish
	deadline time.Time // the caller's, or zero
	seq      uint64    // the number of the batch that took it, 0 while queued
	gone     atomic.Bool
	done     chan struct{} // receives once the reply is in
	timer    *time.Timer   // for a deadline without Done, made once

	reply   any
	results []Result // of batch, the Pipeline's no longer
	err     error
	wrap    bool // err is the client's, for Wrap
}

// deliver hands the outcome to the caller. It is the last touch of p by
// the Pipeline's goroutine: the caller may reuse p at once.
func (p *pending) deliver(reply any, err error, wrap bool) {
	p.reply, p.err, p.wrap = reply, err, wrap
	p.done <- struct{}{}
}

// Do sends c and returns its normalized reply, or its error: a
// *ServerError for an error reply, ErrClosed after Close, an error matching
// ctx.Err() when ctx ends first, and otherwise what Wrap made of the
// client's.
func (p *Pipeline) Do(ctx context.Context, c Call) (any, error) {
	c.boxes = p.boxes
	reply, _, err := p.submit(ctx, c, nil)
	return reply, err
}

// submit sends c, or the batch calls if not nil, in the Pipeline's order:
// on the caller's goroutine when its context allows and nothing is queued
// or in flight beyond Conns (always with Off), else queued as one entry
// (with Off, alone on a goroutine of its own). It returns c's reply, or
// one Result per call of the batch, or an error for the whole: ErrClosed,
// ctx's error if ctx ended first, or what Wrap made of the client's.
func (p *Pipeline) submit(ctx context.Context, c Call, calls []Call) (any, []Result, error) {
	if err := p.check(ctx); err != nil {
		return nil, nil, err
	}
	cctx, direct := p.callContext(ctx)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, ErrClosed
	}
	if direct && (p.cfg.Off || p.busy < p.cfg.Conns && len(p.queue) == 0 && !p.blockedLocked()) {
		if !p.cfg.Off {
			p.busy++
		}
		p.mu.Unlock()
		var reply any
		var results []Result
		var err error
		if calls != nil {
			results, err = PipelineBatch(cctx, calls, p.cfg.Batch)
		} else {
			reply, err = p.cfg.Send(cctx, c)
		}
		if !p.cfg.Off {
			p.release()
		}
		return reply, results, p.wrap(ctx, err)
	}
	pd := p.pendings.Get().(*pending)
	pd.call, pd.batch, pd.seq = c, calls, 0
	pd.deadline, _ = ctx.Deadline()
	if p.cfg.Off {
		p.goroutines.Add(1)
		go p.runOne(pd, false)
	} else {
		p.queue = append(p.queue, pd)
		if p.busy < p.cfg.Conns {
			p.busy++
			p.goroutines.Add(1)
			go p.run()
		}
	}
	p.mu.Unlock()
	if err := p.await(ctx, pd); err != nil {
		return nil, nil, err
	}
	reply, results, err, wrap := pd.reply, pd.results, pd.err, pd.wrap
	pd.call, pd.batch, pd.reply, pd.results, pd.err = Call{}, nil, nil, nil, nil
	p.pendings.Put(pd)
	if wrap {
		err = p.wrap(ctx, err)
	}
	return reply, results, err
}

// check is cfg.Check, or ctx.Err().
func (p *Pipeline) check(ctx context.Context) error {
	if p.cfg.Check != nil {
		return p.cfg.Check(ctx)
	}
	return ctx.Err()
}

// Eval implements Backend.Eval for an adapter over a Pipeline: the script
// call goes through Do.
func (p *Pipeline) Eval(ctx context.Context, s *Script, keys []string, args ...any) (any, error) {
	return p.Do(ctx, Call{Script: s, Keys: keys, Args: args})
}

// SetNX implements Setter.SetNX for an adapter over a Pipeline: SET key
// value NX PX ms goes through Do, sharing round trips with scripts.
func (p *Pipeline) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	ms, err := PX(ttl)
	if err != nil {
		return false, err
	}
	return SetReply(p.Do(ctx, Call{Command: "SET", Line: []any{"SET", p.boxes.box(key), value, "NX", "PX", p.px.box(ms)}}))
}

// SetNXPublish implements SetPublisher.SetNXPublish for an adapter over a
// Pipeline: SET key value NX PX ms and PUBLISH channel message go out as
// one batch of two calls (cfg.Batch), adjacent and in that order, in the
// Pipeline's order with the other calls: sent on the caller's goroutine
// when Do would send a lone call there, or else queued as one entry, which
// a batch of other callers' calls takes whole or not at all. The
// PUBLISH's own error is reported, with the SET's outcome, when the SET
// has none (see SetPublisher). It costs what a batch costs where SetNX
// costs a lone call: use SetNX where nothing is to be announced.
func (p *Pipeline) SetNXPublish(ctx context.Context, key, value string, ttl time.Duration, channel, message string) (bool, error) {
	ms, err := PX(ttl)
	if err != nil {
		return false, err
	}
	sp := p.pairs.Get().(*setPublish)
	sp.set = [...]any{"SET", p.boxes.box(key), value, "NX", "PX", p.px.box(ms)}
	sp.pub = [...]any{"PUBLISH", p.boxes.box(channel), p.boxes.box(message)}
	sp.calls = [...]Call{{Command: "SET", Line: sp.set[:]}, {Command: "PUBLISH", Line: sp.pub[:]}}
	_, results, err := p.submit(ctx, Call{}, sp.calls[:])
	if err != nil {
		// The batch may still be queued, or on the wire: sp is its.
		return false, err
	}
	*sp = setPublish{}
	p.pairs.Put(sp)
	ok, err := SetReply(results[0].Reply, results[0].Err)
	if err == nil && results[1].Err != nil {
		err = fmt.Errorf("PUBLISH %s: %w", channel, results[1].Err)
	}
	return ok, err
}

// setPublish is the two calls of a SetNXPublish, with their lines.
type setPublish struct {
	calls [2]Call
	set   [6]any
	pub   [3]any
}

// EvalBatch implements Batcher.EvalBatch for an adapter over a Pipeline:
// the calls go out as one batch of their own (PipelineBatch over
// cfg.Batch), bounded by ctx as Do's calls are, beside the Pipeline's
// round trips (it takes no place of Conns) but in the order of calls made
// one after another (see Pipeline): a caller that leaves it on the wire
// holds back the calls made after it, and it waits for a call left on the
// wire before it.
func (p *Pipeline) EvalBatch(ctx context.Context, calls []Call) ([]Result, error) {
	if err := p.check(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	cctx, direct := p.callContext(ctx)
	if direct && (p.cfg.Off || !p.blockedLocked()) {
		p.mu.Unlock()
		results, err := PipelineBatch(cctx, calls, p.cfg.Batch)
		return results, p.wrap(ctx, err)
	}
	pd := &pending{batch: calls, done: make(chan struct{}, 1)}
	pd.deadline, _ = ctx.Deadline()
	p.goroutines.Add(1)
	p.mu.Unlock()
	go p.runOne(pd, !p.cfg.Off)
	if err := p.await(ctx, pd); err != nil {
		return nil, err
	}
	return pd.results, p.wrap(ctx, pd.err)
}

// callContext is CallContext for the Pipeline's client.
func (p *Pipeline) callContext(ctx context.Context) (context.Context, bool) {
	if p.cfg.Bounded && p.cfg.Honours && ctx.Done() == nil {
		return ctx, true
	}
	return CallContext(ctx, p.cfg.Honours, p.cfg.Timeout)
}

// await waits for pd's reply, or for ctx to end, in which case it marks pd
// gone and returns ctx's error.
func (p *Pipeline) await(ctx context.Context, pd *pending) error {
	var expired <-chan time.Time
	if dl, ok := ctx.Deadline(); ok && ctx.Done() == nil {
		// A deadline that nothing cancels: a timer, not a goroutine,
		// kept with pd for its next use.
		if pd.timer == nil {
			pd.timer = time.NewTimer(time.Until(dl))
		} else {
			pd.timer.Reset(time.Until(dl))
		}
		defer stop(pd.timer)
		expired = pd.timer.C
	}
	select {
	case <-pd.done:
		return nil
	case <-ctx.Done():
		p.leave(pd)
		return ctx.Err()
	case <-expired:
		p.leave(pd)
		return context.DeadlineExceeded
	}
}

// leave marks pd gone, its caller having left: not to be sent if it was
// not yet. If it is on the wire, the calls made from now on wait for its
// round trip to return (see barrier), so that none overtakes it.
func (p *Pipeline) leave(pd *pending) {
	p.mu.Lock()
	pd.gone.Store(true)
	if pd.seq != 0 && slices.Contains(p.flying, pd.seq) {
		p.barrier = max(p.barrier, pd.seq)
	}
	p.mu.Unlock()
}

// blockedLocked reports whether a batch that a caller left a call in is
// still on the wire (see barrier).
func (p *Pipeline) blockedLocked() bool {
	if p.barrier == 0 {
		return false
	}
	for _, seq := range p.flying {
		if seq <= p.barrier {
			return true
		}
	}
	p.barrier = 0
	return false
}

// flyLocked numbers a batch of pds, about to go on the wire, and counts it
// among those there until landLocked.
func (p *Pipeline) flyLocked(pds ...*pending) uint64 {
	p.seq++
	p.flying = append(p.flying, p.seq)
	for _, pd := range pds {
		pd.seq = p.seq
	}
	return p.seq
}

// landLocked removes the batch numbered seq from those on the wire.
func (p *Pipeline) landLocked(seq uint64) {
	if i := slices.Index(p.flying, seq); i >= 0 {
		p.flying = slices.Delete(p.flying, i, i+1)
	}
	if p.barrier != 0 {
		p.landed.Broadcast()
	}
}

// stop stops t and drains a tick it may have sent: a program whose main
// module predates Go 1.23 keeps the old timers, whose channel can hold a
// stale tick that the timer's next use would take for its own.
func stop(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
}

// wrap classifies err for a caller whose context is ctx.
func (p *Pipeline) wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*ServerError); ok || errors.Is(err, dsync.ErrClosed) || errors.Is(err, dsync.ErrUnexpectedReply) {
		return err
	}
	return p.cfg.Wrap(ctx, err)
}

// release ends a round trip sent on a caller's goroutine: the calls that
// queued meanwhile go out at once, on a goroutine that takes over its
// place in busy.
func (p *Pipeline) release() {
	p.mu.Lock()
	if len(p.queue) > 0 {
		p.goroutines.Add(1)
		go p.run()
	} else {
		p.busy--
	}
	p.mu.Unlock()
}

// run sends the queue as batches until it finds it empty, and gives up its
// place in busy then.
func (p *Pipeline) run() {
	defer p.goroutines.Done()
	var one [1]*pending // a lone call's batch, without an allocation
	batch := one[:0]
	var calls []Call
	var seq uint64 // of the batch this goroutine sent last
	for {
		p.mu.Lock()
		if seq != 0 {
			p.landLocked(seq)
		}
		for p.blockedLocked() {
			p.landed.Wait()
		}
		n := min(len(p.queue), maxBatch)
		if n == 0 {
			p.busy--
			p.mu.Unlock()
			return
		}
		batch = append(batch[:0], p.queue[:n]...)
		rest := copy(p.queue, p.queue[n:])
		clear(p.queue[rest:])
		p.queue = p.queue[:rest]
		seq = p.flyLocked(batch...)
		p.mu.Unlock()
		calls = p.send(batch, calls)
		clear(batch)
	}
}

// send sends the calls of batch whose callers still wait, as one round
// trip, and delivers their replies. calls is a buffer to reuse.
func (p *Pipeline) send(batch []*pending, calls []Call) []Call {
	now := time.Now()
	live := batch[:0]
	var latest time.Time
	bounded := true
	for _, pd := range batch {
		switch {
		case pd.gone.Load():
		case !pd.deadline.IsZero() && !now.Before(pd.deadline):
			pd.deliver(nil, context.DeadlineExceeded, false)
		default:
			live = append(live, pd)
			if pd.deadline.IsZero() {
				bounded = false
			} else if pd.deadline.After(latest) {
				latest = pd.deadline
			}
		}
	}
	if limit := now.Add(p.cfg.Timeout); !bounded || latest.After(limit) {
		latest = limit
	}
	ctx := DeadlineContext(context.Background(), latest)
	switch len(live) {
	case 0:
		return calls
	case 1:
		if live[0].batch == nil {
			// Alone: the client's single-call path is the cheaper.
			reply, err := p.cfg.Send(ctx, live[0].call)
			live[0].deliver(reply, err, true)
			return calls
		}
	}
	calls = calls[:0]
	for _, pd := range live {
		if pd.batch != nil {
			calls = append(calls, pd.batch...) // adjacent, as its caller made them
		} else {
			calls = append(calls, pd.call)
		}
	}
	results, err := PipelineBatch(ctx, calls, p.cfg.Batch)
	clear(calls)
	i := 0
	for _, pd := range live {
		n := 1
		if pd.batch != nil {
			n = len(pd.batch) // read before deliver, after which pd is its caller's
		}
		switch {
		case err != nil:
			pd.deliver(nil, err, true)
		case pd.batch != nil:
			// Its own part of results, which the Pipeline keeps no
			// more than it keeps EvalBatch's.
			pd.results = results[i : i+n : i+n]
			pd.deliver(nil, nil, false)
		default:
			pd.deliver(results[i].Reply, results[i].Err, false)
		}
		i += n
	}
	return calls
}

// runOne sends pd's call, or its batch, alone: a call or a SetNXPublish
// with sharing off, or an EvalBatch, that cannot run on its caller's
// goroutine. An ordered one (an EvalBatch, sharing on) keeps the order of
// calls made one after another as a batch of the queue does: it waits
// while a call left on the wire flies, and is numbered (seq) so that its
// caller, leaving it on the wire, holds back the calls made after.
func (p *Pipeline) runOne(pd *pending, ordered bool) {
	defer p.goroutines.Done()
	if ordered {
		p.mu.Lock()
		for p.blockedLocked() {
			p.landed.Wait()
		}
		seq := p.flyLocked(pd)
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.landLocked(seq)
			p.mu.Unlock()
		}()
	}
	if pd.gone.Load() {
		return // its caller left before it could be sent
	}
	dl := time.Now().Add(p.cfg.Timeout)
	if !pd.deadline.IsZero() && pd.deadline.Before(dl) {
		dl = pd.deadline
	}
	ctx := DeadlineContext(context.Background(), dl)
	if pd.batch != nil {
		results, err := PipelineBatch(ctx, pd.batch, p.cfg.Batch)
		pd.results = results
		pd.deliver(nil, err, true)
		return
	}
	reply, err := p.cfg.Send(ctx, pd.call)
	pd.deliver(reply, err, true)
}

// Close fails the calls still queued with ErrClosed and waits for the
// round trips in flight; later calls fail with ErrClosed. It is
// idempotent.
func (p *Pipeline) Close() {
	p.mu.Lock()
	p.closed = true
	queued := p.queue
	p.queue = nil
	p.mu.Unlock()
	for _, pd := range queued {
		pd.deliver(nil, ErrClosed, false)
	}
	p.goroutines.Wait()
}
