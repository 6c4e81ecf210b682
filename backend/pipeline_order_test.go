package backend_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// wireClient is a client for a Pipeline, in a testing/synctest bubble,
// that numbers the moments each call's round trip begins and ends, so a
// test can tell whether a call was sent before another's round trip had
// returned. Each round trip takes a random latency of fake time.
type wireClient struct {
	mu     sync.Mutex
	rng    *rand.Rand
	events int
	begin  map[string]int // by token
	end    map[string]int
	batchN int
}

func newWireClient(seed uint64) *wireClient {
	return &wireClient{rng: rand.New(rand.NewPCG(seed, seed)), begin: map[string]int{}, end: map[string]int{}}
}

func (c *wireClient) token(call backend.Call) string {
	if call.Script != nil {
		return call.Args[0].(string)
	}
	return fmt.Sprint(call.Line[2]) // SET key value: the value; PUBLISH ch msg: the message
}

func (c *wireClient) trip(calls []backend.Call) {
	c.mu.Lock()
	c.events++
	for _, call := range calls {
		c.begin[c.token(call)] = c.events
	}
	d := time.Duration(c.rng.IntN(5)+1) * time.Millisecond
	c.mu.Unlock()
	time.Sleep(d)
	c.mu.Lock()
	c.events++
	for _, call := range calls {
		c.end[c.token(call)] = c.events
	}
	c.mu.Unlock()
}

func (c *wireClient) send(ctx context.Context, call backend.Call) (any, error) {
	c.trip([]backend.Call{call})
	return call.Args[0], nil
}

func (c *wireClient) batch(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
	c.mu.Lock()
	c.batchN++
	c.mu.Unlock()
	c.trip(calls)
	results := make([]backend.Result, len(calls))
	for i, call := range calls {
		if call.Script != nil {
			results[i].Reply = call.Args[0]
		} else if call.Line[0] == "SET" {
			results[i].Reply = "OK"
		} else {
			results[i].Reply = int64(1)
		}
	}
	return results, nil
}

// after reports whether the call named later began after the round trip
// of the call named earlier ended, or earlier was never sent.
func (c *wireClient) after(earlier, later string) (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, sent := c.begin[earlier]
	if !sent {
		return true, ""
	}
	e, ended := c.end[earlier]
	lb, lsent := c.begin[later]
	if !lsent {
		return true, ""
	}
	return ended && lb > e, fmt.Sprintf("%s on the wire %d..%d, %s began at %d", earlier, b, e, later, lb)
}

// TestPipelineKeepsOrderUnderLoad: callers that share a Pipeline with two
// or three round trips in flight, each abandoning some of its calls on the
// wire and then making a clean-up call (as dsync's Abandon does: an Eval,
// here also a SetNXPublish or an EvalBatch, on a context of its own), never
// see the clean-up sent before the abandoned call's round trip returned.
func TestPipelineKeepsOrderUnderLoad(t *testing.T) {
	for _, conns := range []int{1, 2, 3} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("conns=%d/seed=%d", conns, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := newWireClient(seed)
					p := backend.NewPipeline(backend.PipelineConfig{Send: c.send, Batch: c.batch, Honours: true, Conns: conns})
					defer p.Close()
					rng := rand.New(rand.NewPCG(seed, 7))
					var rmu sync.Mutex
					intn := func(n int) int { rmu.Lock(); defer rmu.Unlock(); return rng.IntN(n) }
					var wg sync.WaitGroup
					for g := range 6 {
						wg.Go(func() {
							for i := range 30 {
								token := fmt.Sprintf("g%d-%d", g, i)
								var ctx context.Context
								cancel := context.CancelFunc(func() {})
								switch intn(3) {
								case 0:
									ctx = context.Background() // direct when it can
								case 1:
									ctx = backend.DeadlineContext(context.Background(), time.Now().Add(time.Duration(intn(6))*time.Millisecond+time.Microsecond))
								default:
									ctx, cancel = context.WithTimeout(context.Background(), time.Duration(intn(6))*time.Millisecond+time.Microsecond)
								}
								var err error
								switch intn(6) {
								case 0:
									_, err = p.SetNXPublish(ctx, "k", token, time.Second, "ch", token+"/pub")
								case 1:
									_, err = p.EvalBatch(ctx, []backend.Call{call(token, false), call(token+"/2", false)})
								default:
									_, err = p.Do(ctx, call(token, false))
								}
								cancel()
								if err == nil {
									continue
								}
								// Left: the clean-up, on a context of its own.
								up := token + "/up"
								actx, acancel := context.WithTimeout(context.Background(), time.Second)
								switch intn(3) {
								case 0:
									_, err = p.SetNXPublish(actx, "k", up, time.Second, "ch", up+"/pub")
								case 1:
									_, err = p.EvalBatch(actx, []backend.Call{call(up, false)})
								default:
									_, err = p.Do(actx, call(up, false))
								}
								acancel()
								if err != nil {
									t.Errorf("clean-up %s: %v", up, err)
								}
								if ok, how := c.after(token, up); !ok {
									t.Errorf("a clean-up overtook the call left on the wire: %s", how)
								}
							}
						})
					}
					wg.Wait()
				})
			})
		}
	}
}

// leftOnTheWire starts a call through p with a cancellable context, waits
// until its round trip begins on c, and cancels it: its caller has left
// a call on the wire, which the test ends with c.end.
func leftOnTheWire(t *testing.T, c *echoClient, p *backend.Pipeline, token string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := leave(p, ctx, token)
	c.began(t)
	cancel()
	if o := recv(t, out); o.err == nil {
		t.Fatalf("%s: no error after its caller left", token)
	}
}

// quiet reports whether no round trip has begun on c since the last one
// the test saw, once every goroutine of the bubble is blocked.
func quiet(c *echoClient) bool {
	synctest.Wait()
	return len(c.entered) == 0
}

// TestPipelineEvalBatchAfterLeaveKeepsOrder: an EvalBatch made after a
// caller left a call on the wire is sent only once that round trip has
// returned, as every other call of the Pipeline, with one round trip or
// more in flight, on its caller's goroutine or on one of its own.
func TestPipelineEvalBatchAfterLeaveKeepsOrder(t *testing.T) {
	for _, conns := range []int{1, 2} {
		for _, cancellable := range []bool{false, true} {
			t.Run(fmt.Sprintf("conns=%d/cancellable=%v", conns, cancellable), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := newEchoClient(true)
					p := c.pipeline(t, backend.PipelineConfig{Conns: conns})
					leftOnTheWire(t, c, p, "abandoned")
					ctx := context.Background()
					if cancellable {
						var cancel context.CancelFunc
						ctx, cancel = context.WithCancel(ctx)
						defer cancel()
					}
					done := make(chan error, 1)
					go func() {
						_, err := p.EvalBatch(ctx, []backend.Call{call("after", false)})
						done <- err
					}()
					if !quiet(c) {
						t.Errorf("an EvalBatch made after a caller left a call on the wire was sent beside it")
						c.end(t) // the EvalBatch, sent beside
					}
					c.end(t) // the abandoned call
					if len(c.entered) == 0 {
						c.began(t)
						c.end(t) // the EvalBatch, in its turn
					}
					if err := recv(t, done); err != nil {
						t.Error(err)
					}
				})
			})
		}
	}
}

// TestPipelineCallAfterLeftEvalBatchKeepsOrder: a call made after an
// EvalBatch's caller left it on the wire is sent only once that round trip
// has returned.
func TestPipelineCallAfterLeftEvalBatchKeepsOrder(t *testing.T) {
	for _, conns := range []int{1, 2} {
		t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newEchoClient(true)
				p := c.pipeline(t, backend.PipelineConfig{Conns: conns})
				ctx, cancel := context.WithCancel(context.Background())
				left := make(chan error, 1)
				go func() {
					_, err := p.EvalBatch(ctx, []backend.Call{call("abandoned", false)})
					left <- err
				}()
				c.began(t)
				cancel()
				if err := recv(t, left); err == nil {
					t.Fatal("EvalBatch: no error after its caller left")
				}
				after := leave(p, context.Background(), "after")
				if !quiet(c) {
					t.Errorf("a call made after an EvalBatch's caller left it on the wire was sent beside it")
					c.end(t)
				}
				c.end(t) // the abandoned EvalBatch
				if len(c.entered) == 0 {
					c.step(t) // the call after, in its turn
				}
				if o := recv(t, after); o.err != nil {
					t.Error(o.err)
				}
			})
		})
	}
}

// TestPipelineBarrierOutlivesAnEarlierBatch: with two round trips in
// flight, one taken before a caller left a call in the other, the call
// made after waits for the abandoned one's round trip, not for whichever
// lands first; and the goroutine of the batch that landed first waits, or
// leaves, without sending it.
func TestPipelineBarrierOutlivesAnEarlierBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newEchoClient(true)
		p := c.pipeline(t, backend.PipelineConfig{Conns: 3})
		bg := context.Background()
		// A direct call holds a place; two batches fly beside it.
		direct := leave(p, bg, "direct")
		c.began(t)
		other, cancelOther := context.WithCancel(bg)
		defer cancelOther()
		earlier := leave(p, other, "earlier") // queued: a run goroutine sends it
		c.began(t)
		leftOnTheWire(t, c, p, "abandoned")
		after := leave(p, bg, "after")
		// The three round trips end in the order they began: "direct"
		// and "earlier" first, then "abandoned".
		c.end(t)
		c.end(t)
		if o := recv(t, direct); o.err != nil {
			t.Error(o.err)
		}
		if o := recv(t, earlier); o.err != nil {
			t.Error(o.err)
		}
		if !quiet(c) || backend.Queued(p) != 1 {
			t.Fatal("a call made after a caller left a call on the wire was sent once an earlier round trip landed")
		}
		c.end(t) // the abandoned call
		c.step(t)
		if o := recv(t, after); o.err != nil {
			t.Error(o.err)
		}
	})
}

// TestPipelineCloseWhileHeldBack: Close, while a run goroutine waits for
// the round trip of a call left on the wire, fails the call held back
// with ErrClosed, returns once that round trip has, and leaves no
// goroutine behind.
func TestPipelineCloseWhileHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newEchoClient(true)
		p := c.pipeline(t, backend.PipelineConfig{Conns: 2})
		leftOnTheWire(t, c, p, "abandoned")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		after := leave(p, ctx, "after") // a second run goroutine takes it, or would
		synctest.Wait()
		closed := make(chan struct{})
		go func() { p.Close(); close(closed) }()
		if o := recv(t, after); !errors.Is(o.err, backend.ErrClosed) {
			t.Errorf("a call held back at Close: %v, want ErrClosed", o.err)
		}
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned with a round trip on the wire")
		default:
		}
		c.end(t)
		recv(t, closed)
		if len(c.entered) != 0 {
			t.Error("a round trip began after Close")
		}
	})
}

// TestPipelineBarrierBatchFails: a batch left on the wire that fails as
// a whole lets the calls held back behind it go.
func TestPipelineBarrierBatchFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sendGate, batchGate := make(chan struct{}), make(chan struct{})
		sent, batched := make(chan string, 10), make(chan []string, 10)
		p := backend.NewPipeline(backend.PipelineConfig{
			Conns: 3, Honours: true,
			Send: func(ctx context.Context, c backend.Call) (any, error) {
				sent <- c.Args[0].(string)
				<-sendGate
				return c.Args[0], nil
			},
			Batch: func(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
				var tokens []string
				for _, c := range calls {
					tokens = append(tokens, c.Args[0].(string))
				}
				batched <- tokens
				<-batchGate
				return nil, io.ErrUnexpectedEOF
			},
		})
		defer p.Close()
		bg := context.Background()
		// Three places taken by direct calls, while two calls queue.
		one, two, three := leave(p, bg, "one"), leave(p, bg, "two"), leave(p, bg, "three")
		for range 3 {
			recv(t, sent)
		}
		mid, leaveMid := context.WithCancel(bg)
		cctx, cancel := context.WithCancel(bg)
		defer cancel()
		gone, stays := leave(p, mid, "abandoned"), leave(p, cctx, "stays")
		awaitQueued(t, p, 2)
		sendGate <- struct{}{} // a direct call returns: the queue goes out as a batch
		if b := recv(t, batched); len(b) != 2 {
			t.Fatalf("batch %v, want the two queued calls", b)
		}
		leaveMid()
		recv(t, gone)
		sendGate <- struct{}{} // another returns: a place is free
		synctest.Wait()
		after := leave(p, bg, "after")
		synctest.Wait()
		if len(sent) != 0 || len(batched) != 0 {
			t.Fatal("a call made after a caller left a call on the wire was sent beside it")
		}
		close(batchGate) // the batch fails as a whole
		if o := recv(t, stays); o.err == nil {
			t.Error("a call of a batch that failed: no error")
		}
		if tok := recv(t, sent); tok != "after" {
			t.Errorf("sent %s, want the call held back", tok)
		}
		close(sendGate)
		for _, o := range []chan outcome{one, two, three, after} {
			if o := recv(t, o); o.err != nil {
				t.Error(o.err)
			}
		}
	})
}
