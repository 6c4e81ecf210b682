package backend_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// echoClient is a client for a Pipeline that answers every call with its
// first argument, or with an error reply when its second is "fail". A
// round trip takes latency; a gated client's waits instead for a step of
// the test's.
type echoClient struct {
	latency time.Duration
	gated   bool
	entered chan struct{} // a round trip began
	arrived chan struct{} // gated: a round trip joined gates (capacity 1)
	err     error         // of every batch, when set

	mu      sync.Mutex
	gates   []chan struct{} // gated: the round trips in flight, oldest first
	opened  bool            // gated: every round trip goes on (see open)
	sends   int             // calls sent alone
	batches [][]any         // the first argument of each call of each batch
}

func newEchoClient(gated bool) *echoClient {
	return &echoClient{gated: gated, entered: make(chan struct{}, 1000), arrived: make(chan struct{}, 1)}
}

// wait is a round trip: a gated client's waits until end lets it go, in
// the order the round trips began (a round trip joins gates before the
// test can see it begin), whatever order their goroutines come to wait
// in.
func (c *echoClient) wait() {
	if c.gated {
		g := make(chan struct{})
		c.mu.Lock()
		if c.opened {
			c.mu.Unlock()
			return
		}
		c.gates = append(c.gates, g)
		c.mu.Unlock()
		select {
		case c.arrived <- struct{}{}:
		default:
		}
		c.entered <- struct{}{}
		<-g
	} else if c.latency > 0 {
		time.Sleep(c.latency) // the server's round trip
	}
}

// open lets every round trip of a gated client, in flight or to come, go
// on: for a test that ended with some held.
func (c *echoClient) open() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opened = true
	for _, g := range c.gates {
		close(g)
	}
	c.gates = nil
}

// began waits until a round trip of a gated client begins.
func (c *echoClient) began(t *testing.T) {
	t.Helper()
	recv(t, c.entered)
}

// end lets the oldest round trip in flight of a gated client end, once
// one is.
func (c *echoClient) end(t *testing.T) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		if len(c.gates) > 0 {
			g := c.gates[0]
			c.gates = c.gates[1:]
			c.mu.Unlock()
			close(g)
			return
		}
		c.mu.Unlock()
		select {
		case <-c.arrived:
		case <-timeout:
			t.Fatal("no round trip in flight within 5s")
		}
	}
}

// step lets the next round trip of a gated client end, once it began.
func (c *echoClient) step(t *testing.T) {
	t.Helper()
	c.began(t)
	c.end(t)
}

func answer(call backend.Call) (any, error) {
	if len(call.Args) > 1 && call.Args[1] == "fail" {
		return nil, &backend.ServerError{Message: fmt.Sprintf("ECHOFAIL %v", call.Args[0])}
	}
	return call.Args[0], nil
}

func (c *echoClient) send(ctx context.Context, call backend.Call) (any, error) {
	if ctx.Done() != nil {
		panic("Send given a context that can be cancelled")
	}
	if _, ok := ctx.Deadline(); !ok {
		panic("Send given a context without a deadline")
	}
	c.mu.Lock()
	c.sends++
	c.mu.Unlock()
	c.wait()
	return answer(call)
}

func (c *echoClient) batch(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
	if ctx.Done() != nil {
		panic("Batch given a context that can be cancelled")
	}
	firsts := make([]any, len(calls))
	for i, call := range calls {
		firsts[i] = call.Args[0]
	}
	c.mu.Lock()
	c.batches = append(c.batches, firsts)
	c.mu.Unlock()
	c.wait()
	if c.err != nil {
		return nil, c.err
	}
	results := make([]backend.Result, len(calls))
	for i, call := range calls {
		results[i].Reply, results[i].Err = answer(call)
	}
	return results, nil
}

func (c *echoClient) counts() (sends, batches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sends, len(c.batches)
}

// pipeline returns a Pipeline over c, closed when t ends, after the round
// trips a failed test left held have been let go.
func (c *echoClient) pipeline(t *testing.T, cfg backend.PipelineConfig) *backend.Pipeline {
	cfg.Send, cfg.Batch, cfg.Honours = c.send, c.batch, true
	p := backend.NewPipeline(cfg)
	t.Cleanup(p.Close)
	if c.gated {
		t.Cleanup(c.open)
	}
	return p
}

var echoScript = backend.NewScript("return ARGV[1]")

func call(token string, fail bool) backend.Call {
	c := backend.Call{Script: echoScript, Args: []any{token}}
	if fail {
		c.Args = append(c.Args, "fail")
	}
	return c
}

// check checks the outcome of call(token, fail).
func check(token string, fail bool, reply any, err error) error {
	if fail {
		var se *backend.ServerError
		if !errors.As(err, &se) || se.Message != "ECHOFAIL "+token {
			return fmt.Errorf("call %s: got %v, %v; want its error reply", token, reply, err)
		}
		return nil
	}
	if err != nil || reply != token {
		return fmt.Errorf("call %s: got %v, %v; want its own reply", token, reply, err)
	}
	return nil
}

// awaitQueued waits until n calls are queued in p.
func awaitQueued(t *testing.T, p *backend.Pipeline, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; backend.Queued(p) < n; i++ {
		if time.Now().After(deadline) || i > 100000 {
			t.Fatalf("%d calls queued, want %d", backend.Queued(p), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestPipelineRepliesReachTheirCallers(t *testing.T) {
	c := newEchoClient(false)
	c.latency = 200 * time.Microsecond
	p := c.pipeline(t, backend.PipelineConfig{})
	const callers, calls = 200, 20
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var failures atomic.Int64
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range calls {
				cctx := ctx
				switch (g + n) % 3 {
				case 1:
					cctx = backend.DeadlineContext(ctx, time.Now().Add(30*time.Second))
				case 2:
					cctx = context.Background()
				}
				token, fail := fmt.Sprintf("%d/%d", g, n), (g+n)%7 == 0
				reply, err := p.Do(cctx, call(token, fail))
				if err := check(token, fail, reply, err); err != nil {
					if failures.Add(1) < 10 {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	sends, batches := c.counts()
	if trips := sends + batches; trips >= callers*calls/2 {
		t.Errorf("%d calls from %d goroutines took %d round trips (%d alone, %d batches): they did not share them", callers*calls, callers, trips, sends, batches)
	} else {
		t.Logf("%d calls from %d goroutines: %d round trips (%d alone, %d batches)", callers*calls, callers, trips, sends, batches)
	}
}

// TestPipelineBatchesWhatQueued: the calls made while a round trip is on
// the wire go out together, as one batch, once it returns.
func TestPipelineBatchesWhatQueued(t *testing.T) {
	c := newEchoClient(true)
	p := c.pipeline(t, backend.PipelineConfig{Conns: 1})
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		reply, err := p.Do(ctx, call("first", false))
		first <- check("first", false, reply, err)
	}()
	const queued = 20
	errs := make(chan error, queued)
	for i := range queued {
		go func() {
			token := fmt.Sprint(i)
			reply, err := p.Do(ctx, call(token, i%4 == 0))
			errs <- check(token, i%4 == 0, reply, err)
		}()
	}
	awaitQueued(t, p, queued)
	c.step(t) // the first call
	c.step(t) // the batch
	if err := recv(t, first); err != nil {
		t.Error(err)
	}
	for range queued {
		if err := recv(t, errs); err != nil {
			t.Error(err)
		}
	}
	sends, batches := c.counts()
	if sends != 1 || batches != 1 || len(c.batches[0]) != queued {
		t.Errorf("one call alone and %d queued behind it: %d sent alone, batches %v; want 1 alone and one batch of %d", queued, sends, c.batches, queued)
	}
}

type outcome struct {
	err  error
	took time.Duration
}

// recv returns what c delivers, or fails t after 5s.
func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing within 5s")
		panic("unreachable")
	}
}

// leave calls p with ctx on a goroutine of its own.
func leave(p *backend.Pipeline, ctx context.Context, token string) chan outcome {
	out := make(chan outcome, 1)
	go func() {
		start := time.Now()
		_, err := p.Do(ctx, call(token, false))
		out <- outcome{err, time.Since(start)}
	}()
	return out
}

// TestPipelineQueuedCallerLeaves: a caller whose context ends while its
// call is queued returns at once with its error, its call is not sent,
// and the others get their own replies.
func TestPipelineQueuedCallerLeaves(t *testing.T) {
	c := newEchoClient(true)
	p := c.pipeline(t, backend.PipelineConfig{Conns: 1})
	bg := context.Background()
	wire := leave(p, bg, "on the wire")
	c.began(t)
	cancelled, cancel := context.WithCancel(bg)
	a := leave(p, cancelled, "cancelled")
	b := leave(p, backend.DeadlineContext(bg, time.Now().Add(30*time.Millisecond)), "deadline")
	stays := make(chan error, 1)
	go func() {
		reply, err := p.Do(bg, call("stays", false))
		stays <- check("stays", false, reply, err)
	}()
	awaitQueued(t, p, 3)
	cancel()
	if o := recv(t, a); !errors.Is(o.err, context.Canceled) || o.took > time.Second {
		t.Errorf("a queued call cancelled: %v after %v, want context.Canceled at once", o.err, o.took)
	}
	if o := recv(t, b); !errors.Is(o.err, context.DeadlineExceeded) || o.took > time.Second {
		t.Errorf("a queued call with a 30ms deadline and no Done: %v after %v, want context.DeadlineExceeded by then", o.err, o.took)
	}
	c.end(t) // the call on the wire
	if o := recv(t, wire); o.err != nil {
		t.Error(o.err)
	}
	c.step(t) // the one that stayed, alone
	if err := recv(t, stays); err != nil {
		t.Error(err)
	}
	if sends, batches := c.counts(); sends != 2 || batches != 0 {
		t.Errorf("the calls whose callers left were sent: %d alone, batches %v; want only the one that stayed", sends, c.batches)
	}
}

// TestPipelineCallerLeavesMidFlight: a caller whose context ends while its
// call is on the wire, in a batch, returns at once with its error, and the
// others of the batch get their own replies.
func TestPipelineCallerLeavesMidFlight(t *testing.T) {
	c := newEchoClient(true)
	p := c.pipeline(t, backend.PipelineConfig{Conns: 1})
	bg := context.Background()
	leave(p, bg, "first")
	c.began(t)
	mid, cancel := context.WithCancel(bg)
	gone := leave(p, mid, "gone")
	awaitQueued(t, p, 1)
	const others = 10
	errs := make(chan error, others)
	for i := range others {
		go func() {
			token := fmt.Sprint(i)
			reply, err := p.Do(bg, call(token, false))
			errs <- check(token, false, reply, err)
		}()
	}
	awaitQueued(t, p, 1+others)
	c.end(t)   // the first call
	c.began(t) // the batch is on the wire
	cancel()
	if o := recv(t, gone); !errors.Is(o.err, context.Canceled) || o.took > time.Second {
		t.Errorf("a call cancelled on the wire: %v after %v, want context.Canceled at once", o.err, o.took)
	}
	c.end(t) // the batch
	for range others {
		if err := recv(t, errs); err != nil {
			t.Error(err)
		}
	}
	if _, batches := c.counts(); batches != 1 || len(c.batches[0]) != 1+others || c.batches[0][0] != "gone" {
		t.Errorf("batches %v, want one of the %d queued calls, the cancelled one first", c.batches, 1+others)
	}
}

// TestPipelineKeepsOrder: a call made after the caller of another left,
// while that one is on the wire, is sent only once that round trip has
// returned, so that the server runs it after the abandoned one (as dsync's
// withdrawal of an abandoned acquisition needs).
func TestPipelineKeepsOrder(t *testing.T) {
	synctest.Test(t, testPipelineKeepsOrder)
}

func testPipelineKeepsOrder(t *testing.T) {
	c := newEchoClient(true)
	p := c.pipeline(t, backend.PipelineConfig{})
	bg := context.Background()
	first := leave(p, bg, "first")
	c.began(t)
	mid, cancel := context.WithCancel(bg)
	abandoned := leave(p, mid, "abandoned")
	awaitQueued(t, p, 1)
	c.end(t)   // the first call
	c.began(t) // the abandoned call is on the wire
	cancel()
	recv(t, abandoned)
	recv(t, first)
	sendAfterAbandoned(t, c, p)
	if sends, batches := c.counts(); sends != 3 || batches != 0 {
		t.Errorf("%d calls sent alone, batches %v; want three alone, in order", sends, c.batches)
	}
}

// sendAfterAbandoned makes a call while a call whose caller left is on the
// wire of c, the only round trip there, and checks that it is held back
// until that round trip has returned, then sent. It runs in a
// testing/synctest bubble: held back is what it finds once every
// goroutine of the bubble is blocked (see quiet).
func sendAfterAbandoned(t *testing.T, c *echoClient, p *backend.Pipeline) {
	t.Helper()
	after := leave(p, context.Background(), "after")
	if !quiet(c) || backend.Queued(p) != 1 {
		t.Fatalf("a call made after another's caller left was sent while that one was on the wire (%d round trips began, %d calls queued)", len(c.entered), backend.Queued(p))
	}
	c.end(t)  // the abandoned call
	c.step(t) // the one after
	if o := recv(t, after); o.err != nil {
		t.Error(o.err)
	}
}

// TestPipelineKeepsOrderWithTwoConns: with two round trips allowed in
// flight, a call made after another's caller left, while that one is on
// the wire, still waits for that round trip to return, though a second
// one could go out beside it; and calls go out beside each other again
// once it has.
func TestPipelineKeepsOrderWithTwoConns(t *testing.T) {
	synctest.Test(t, testPipelineKeepsOrderWithTwoConns)
}

func testPipelineKeepsOrderWithTwoConns(t *testing.T) {
	c := newEchoClient(true)
	p := c.pipeline(t, backend.PipelineConfig{Conns: 2})
	bg := context.Background()
	mid, cancel := context.WithCancel(bg)
	abandoned := leave(p, mid, "abandoned")
	c.began(t) // on the wire
	cancel()
	recv(t, abandoned)
	sendAfterAbandoned(t, c, p)
	// Nobody left a call on the wire: two round trips fly at once.
	one, two := leave(p, bg, "one"), leave(p, bg, "two")
	c.began(t)
	c.began(t)
	c.end(t)
	c.end(t)
	for _, o := range []chan outcome{one, two} {
		if o := recv(t, o); o.err != nil {
			t.Error(o.err)
		}
	}
	if sends, batches := c.counts(); sends != 4 || batches != 0 {
		t.Errorf("%d calls sent alone, batches %v; want four alone", sends, c.batches)
	}
}

// TestPipelineBatchFails: a batch that fails as a whole fails each of its
// calls with the client's error, wrapped for its caller: no context error
// while the caller's context lives. The next calls go through.
func TestPipelineBatchFails(t *testing.T) {
	c := newEchoClient(true)
	c.err = io.ErrUnexpectedEOF
	p := c.pipeline(t, backend.PipelineConfig{Conns: 1, Wrap: func(ctx context.Context, err error) error {
		return backend.TransportError(ctx, "echo", err)
	}})
	bg := context.Background()
	first := leave(p, bg, "first")
	c.began(t)
	const queued = 5
	outs := make([]chan outcome, queued)
	for i := range outs {
		outs[i] = leave(p, backend.DeadlineContext(bg, time.Now().Add(time.Minute)), fmt.Sprint(i))
	}
	awaitQueued(t, p, queued)
	c.end(t)
	if o := recv(t, first); o.err != nil {
		t.Errorf("the call sent alone: %v", o.err)
	}
	c.step(t)
	for i, out := range outs {
		o := recv(t, out)
		if !errors.Is(o.err, io.ErrUnexpectedEOF) || errors.Is(o.err, context.DeadlineExceeded) || errors.Is(o.err, context.Canceled) {
			t.Errorf("call %d of a failed batch: %v, want the transport error, matching no context error", i, o.err)
		}
	}
	c.err = nil
	after := leave(p, bg, "after")
	c.step(t)
	if o := recv(t, after); o.err != nil {
		t.Errorf("a call after a failed batch: %v", o.err)
	}
}

// TestPipelineClose: Close fails the queued calls with ErrClosed, waits
// for the round trip in flight, and makes later calls fail with ErrClosed.
func TestPipelineClose(t *testing.T) {
	c := newEchoClient(true)
	p := c.pipeline(t, backend.PipelineConfig{Conns: 1})
	bg := context.Background()
	// A context that can be cancelled: the call goes through the
	// Pipeline's goroutine, which Close waits for. (One sent on its
	// caller's goroutine is the caller's to wait for.)
	cctx, cancel := context.WithCancel(bg)
	defer cancel()
	wire := leave(p, cctx, "on the wire")
	c.began(t)
	queued := leave(p, bg, "queued")
	awaitQueued(t, p, 1)
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	if o := recv(t, queued); !errors.Is(o.err, dsync.ErrClosed) {
		t.Errorf("a call queued at Close: %v, want ErrClosed", o.err)
	}
	select {
	case <-closed:
		t.Error("Close returned with a round trip in flight")
	case <-time.After(20 * time.Millisecond): // time is what is tested: Close waits
	}
	c.end(t)
	recv(t, closed)
	if o := recv(t, wire); o.err != nil {
		t.Errorf("the call in flight at Close: %v", o.err)
	}
	p.Close()
	if _, err := p.Do(bg, call("later", false)); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Do after Close: %v, want ErrClosed", err)
	}
	for _, ctx := range []context.Context{bg, cctx} {
		if _, err := p.EvalBatch(ctx, []backend.Call{call("later", false)}); !errors.Is(err, dsync.ErrClosed) {
			t.Errorf("EvalBatch after Close: %v, want ErrClosed", err)
		}
	}
}

// TestPipelineOff: with sharing off, concurrent calls each go alone.
func TestPipelineOff(t *testing.T) {
	c := newEchoClient(false)
	c.latency = 200 * time.Microsecond
	p := c.pipeline(t, backend.PipelineConfig{Off: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 10 {
				cctx := ctx
				if n%2 == 0 {
					cctx = context.Background()
				}
				token := fmt.Sprintf("%d/%d", g, n)
				if reply, err := p.Do(cctx, call(token, false)); check(token, false, reply, err) != nil {
					t.Errorf("call %s: %v, %v", token, reply, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if sends, batches := c.counts(); sends != 500 || batches != 0 {
		t.Errorf("with sharing off, 500 calls: %d sent alone, %d batches; want all alone", sends, batches)
	}
}

type ctxKey struct{}

// TestPipelineLoneCaller: a call whose context allows runs on its caller's
// goroutine (its context's values reach the client) at no allocation; one
// whose context can be cancelled goes through the Pipeline's goroutine.
func TestPipelineLoneCaller(t *testing.T) {
	var direct atomic.Bool
	reply := any("r")
	p := backend.NewPipeline(backend.PipelineConfig{
		Honours: true,
		Send: func(ctx context.Context, c backend.Call) (any, error) {
			direct.Store(ctx.Value(ctxKey{}) != nil)
			return reply, nil
		},
		Batch: func(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
			panic("a lone call batched")
		},
	})
	defer p.Close()
	ctx := context.WithValue(context.Background(), ctxKey{}, true)
	dctx := backend.DeadlineContext(ctx, time.Now().Add(time.Hour))
	c := call("x", false)
	for _, cctx := range []context.Context{ctx, dctx} {
		if _, err := p.Do(cctx, c); err != nil || !direct.Load() {
			t.Errorf("a lone call with a context that cannot be cancelled: %v, sent on its goroutine: %v", err, direct.Load())
		}
	}
	if n := testing.AllocsPerRun(100, func() { p.Do(dctx, c) }); n > 0 {
		t.Errorf("a lone call with a deadline and no Done: %v allocations, want none", n)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := p.Do(cctx, c); err != nil || direct.Load() {
		t.Errorf("a lone call with a context that can be cancelled: %v, sent on its goroutine: %v", err, direct.Load())
	}
}

// TestPipelineBoundedClient: with Bounded, a lone call whose context has
// no deadline reaches Send without one, and with the values of its
// context: the client bounds it. Without Bounded, it gets Timeout.
func TestPipelineBoundedClient(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		var gotDeadline, gotValue bool
		p := backend.NewPipeline(backend.PipelineConfig{
			Honours: true, Bounded: bounded,
			Send: func(ctx context.Context, c backend.Call) (any, error) {
				_, gotDeadline = ctx.Deadline()
				gotValue = ctx.Value(ctxKey{}) != nil
				return "r", nil
			},
			Batch: func(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
				panic("a lone call batched")
			},
		})
		ctx := context.WithValue(context.Background(), ctxKey{}, true)
		c := call("x", false)
		if _, err := p.Do(ctx, c); err != nil {
			t.Fatal(err)
		}
		if gotDeadline == bounded || !gotValue {
			t.Errorf("Bounded %v: Send's context has a deadline: %v (want %v), the caller's values: %v", bounded, gotDeadline, !bounded, gotValue)
		}
		if bounded {
			if n := testing.AllocsPerRun(100, func() { p.Do(ctx, c) }); n > 0 {
				t.Errorf("a lone call without a deadline to a bounded client: %v allocations, want none", n)
			}
		}
		p.Close()
	}
}

func TestPipelineEvalBatch(t *testing.T) {
	c := newEchoClient(false)
	p := c.pipeline(t, backend.PipelineConfig{})
	calls := []backend.Call{call("a", false), call("b", true), call("c", false)}
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ctx := range []context.Context{context.Background(), cctx} {
		results, err := p.EvalBatch(ctx, calls)
		if err != nil || len(results) != 3 {
			t.Fatalf("EvalBatch: %v, %v", results, err)
		}
		for i, tok := range []string{"a", "b", "c"} {
			if err := check(tok, i == 1, results[i].Reply, results[i].Err); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestSetNXHelpers(t *testing.T) {
	for ttl, want := range map[time.Duration]int64{time.Millisecond: 1, 1500 * time.Microsecond: 2, time.Nanosecond: 1, 30 * time.Second: 30000} {
		if got, err := backend.PX(ttl); got != want || err != nil {
			t.Errorf("PX(%v) = %d, %v; want %d", ttl, got, err, want)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := backend.PX(ttl); !errors.Is(err, dsync.ErrInvalidLease) {
			t.Errorf("PX(%v): %v, want ErrInvalidLease", ttl, err)
		}
	}
	for _, c := range []struct {
		reply any
		err   error
		want  bool
		bad   bool
	}{{"OK", nil, true, false}, {nil, nil, false, false}, {int64(1), nil, false, true}, {nil, io.EOF, false, true}} {
		got, err := backend.SetReply(c.reply, c.err)
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("SetReply(%#v, %v) = %v, %v", c.reply, c.err, got, err)
		}
	}
	if _, err := backend.SetReply(int64(1), nil); !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Errorf("SetReply of an integer: %v, want ErrUnexpectedReply", err)
	}
}

func TestCommandLine(t *testing.T) {
	s := backend.NewScript("return 1")
	c := backend.Call{Script: s, Keys: []string{"k1", "k2"}, Args: []any{"a", 7}}
	if got, want := c.CommandLine(false), []any{"EVALSHA", s.Hash(), 2, "k1", "k2", "a", 7}; !reflect.DeepEqual(got, want) {
		t.Errorf("CommandLine(false) = %#v, want %#v", got, want)
	}
	if got, want := c.CommandLine(true), []any{"EVAL", "return 1", 2, "k1", "k2", "a", 7}; !reflect.DeepEqual(got, want) {
		t.Errorf("CommandLine(true) = %#v, want %#v", got, want)
	}
	set := backend.Call{Command: "SET", Keys: []string{"k"}, Args: []any{"v", "NX", "PX", int64(5)}}
	if got, want := set.CommandLine(false), []any{"SET", "k", "v", "NX", "PX", int64(5)}; !reflect.DeepEqual(got, want) {
		t.Errorf("CommandLine of SET = %#v, want %#v", got, want)
	}
}

func TestPipelineCommandLineOfReusedKeys(t *testing.T) {
	var lines [][]any
	p := backend.NewPipeline(backend.PipelineConfig{Send: func(ctx context.Context, c backend.Call) (any, error) {
		lines = append(lines, c.CommandLine(false))
		return "OK", nil
	}})
	defer p.Close()
	s := backend.NewScript("return 1")
	keys := []string{"{a}:1", "{a}:2"}
	for _, k := range []string{"{a}:2", "{a}:3", "{a}:2"} {
		keys[1] = k
		if _, err := p.Do(context.Background(), backend.Call{Script: s, Keys: keys, Args: []any{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ttl := range []time.Duration{8 * time.Second, 9 * time.Second} {
		if _, err := p.SetNX(context.Background(), keys[1], "v", ttl); err != nil {
			t.Fatal(err)
		}
	}
	want := [][]any{
		{"EVALSHA", s.Hash(), 2, "{a}:1", "{a}:2", "x"},
		{"EVALSHA", s.Hash(), 2, "{a}:1", "{a}:3", "x"},
		{"EVALSHA", s.Hash(), 2, "{a}:1", "{a}:2", "x"},
		{"SET", "{a}:2", "v", "NX", "PX", "8000"},
		{"SET", "{a}:2", "v", "NX", "PX", "9000"},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("command lines = %#v\nwant %#v", lines, want)
	}
}
