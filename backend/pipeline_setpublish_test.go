package backend_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// lineClient is a client for a Pipeline that records the command line of
// every call it is given, alone or in a batch, and answers as a server
// would: SET of a key named "taken..." with nil (the key exists), other
// SETs with OK, PUBLISH with 1 receiver, or with an error reply on a
// channel named "denied...", a script call with its first argument. A
// gated client's round trips each wait for a step of the test's.
type lineClient struct {
	echo *echoClient // its gate alone
	err  error       // of every batch, when set

	mu      sync.Mutex
	sends   []string   // the lines of the calls sent alone
	batches [][]string // the lines of each batch's calls
}

func newLineClient(gated bool) *lineClient {
	return &lineClient{echo: newEchoClient(gated)}
}

func line(c backend.Call) string {
	return strings.TrimSuffix(fmt.Sprintln(c.CommandLine(false)...), "\n")
}

func (c *lineClient) reply(call backend.Call) backend.Result {
	l := call.CommandLine(false)
	switch {
	case l[0] == "SET" && strings.HasPrefix(l[1].(string), "taken"):
		return backend.Result{}
	case l[0] == "SET":
		return backend.Result{Reply: "OK"}
	case l[0] == "PUBLISH" && strings.HasPrefix(l[1].(string), "denied"):
		return backend.Result{Err: &backend.ServerError{Message: "NOPERM no permissions to access the channel"}}
	case l[0] == "PUBLISH":
		return backend.Result{Reply: int64(1)}
	}
	return backend.Result{Reply: call.Args[0]}
}

func (c *lineClient) send(ctx context.Context, call backend.Call) (any, error) {
	c.mu.Lock()
	c.sends = append(c.sends, line(call))
	c.mu.Unlock()
	c.echo.wait()
	r := c.reply(call)
	return r.Reply, r.Err
}

func (c *lineClient) batch(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
	if ctx.Done() != nil {
		panic("Batch given a context that can be cancelled")
	}
	lines := make([]string, len(calls))
	for i, call := range calls {
		lines[i] = line(call)
	}
	c.mu.Lock()
	c.batches = append(c.batches, lines)
	c.mu.Unlock()
	c.echo.wait()
	if c.err != nil {
		return nil, c.err
	}
	results := make([]backend.Result, len(calls))
	for i, call := range calls {
		results[i] = c.reply(call)
	}
	return results, nil
}

func (c *lineClient) recorded() (sends []string, batches [][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sends...), append([][]string(nil), c.batches...)
}

func (c *lineClient) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sends, c.batches = nil, nil
}

func (c *lineClient) pipeline(t *testing.T, cfg backend.PipelineConfig) *backend.Pipeline {
	cfg.Send, cfg.Batch, cfg.Honours = c.send, c.batch, true
	p := backend.NewPipeline(cfg)
	t.Cleanup(p.Close)
	if c.echo.gated {
		t.Cleanup(c.echo.open)
	}
	return p
}

// TestPipelineSetNXPublishIsOneBatch: the SET and the PUBLISH of a lone
// SetNXPublish go to the client as one batch of two calls, SET first,
// whatever the context and with sharing on or off; the SET's outcome is
// reported, and a PUBLISH's error reply with it, as the error.
func TestPipelineSetNXPublishIsOneBatch(t *testing.T) {
	bg := context.Background()
	cctx, cancel := context.WithCancel(bg)
	defer cancel()
	contexts := map[string]context.Context{
		"no deadline":             bg,
		"a deadline without Done": backend.DeadlineContext(bg, time.Now().Add(time.Hour)),
		"a cancellable context":   cctx,
	}
	for _, off := range []bool{false, true} {
		c := newLineClient(false)
		p := c.pipeline(t, backend.PipelineConfig{Off: off})
		for name, ctx := range contexts {
			for _, tc := range []struct {
				key, channel string
				want, denied bool
			}{
				{"k", "ch", true, false},
				{"taken", "ch", false, false},
				{"k2", "denied", true, true},
				{"taken", "denied", false, true},
			} {
				c.reset()
				ok, err := p.SetNXPublish(ctx, tc.key, "v", 1500*time.Millisecond, tc.channel, "hint")
				var se *backend.ServerError
				switch {
				case ok != tc.want:
					t.Errorf("Off %v, %s: SetNXPublish(%q, channel %q): %v, %v; want the SET's outcome, %v", off, name, tc.key, tc.channel, ok, err, tc.want)
				case !tc.denied && err != nil:
					t.Errorf("Off %v, %s: SetNXPublish(%q, channel %q): %v; want no error", off, name, tc.key, tc.channel, err)
				case tc.denied && (!errors.As(err, &se) || se.Prefix() != "NOPERM" || !strings.Contains(err.Error(), "PUBLISH denied")):
					t.Errorf("Off %v, %s: SetNXPublish(%q, channel %q): %v; want the PUBLISH's error reply, naming the channel", off, name, tc.key, tc.channel, err)
				}
				sends, batches := c.recorded()
				want := [][]string{{"SET " + tc.key + " v NX PX 1500", "PUBLISH " + tc.channel + " hint"}}
				if len(sends) != 0 || !reflect.DeepEqual(batches, want) {
					t.Errorf("Off %v, %s: sent alone %q, batches %q; want the one batch %q", off, name, sends, batches, want)
				}
			}
		}
	}
}

// TestPipelineSetNXPublishFails: a ttl of zero or less, an ended context
// and a closed Pipeline fail the call before anything is sent; a batch
// that fails as a whole fails it with the client's error, wrapped.
func TestPipelineSetNXPublishFails(t *testing.T) {
	bg := context.Background()
	c := newLineClient(false)
	p := c.pipeline(t, backend.PipelineConfig{Wrap: func(ctx context.Context, err error) error {
		return backend.TransportError(ctx, "lines", err)
	}})
	for _, ttl := range []time.Duration{0, -time.Second} {
		if ok, err := p.SetNXPublish(bg, "k", "v", ttl, "ch", "hint"); ok || !errors.Is(err, dsync.ErrInvalidLease) {
			t.Errorf("SetNXPublish with a ttl of %v: %v, %v; want ErrInvalidLease", ttl, ok, err)
		}
	}
	cctx, cancel := context.WithCancel(bg)
	cancel()
	if ok, err := p.SetNXPublish(cctx, "k", "v", time.Second, "ch", "hint"); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("SetNXPublish with a cancelled context: %v, %v; want context.Canceled", ok, err)
	}
	if sends, batches := c.recorded(); len(sends)+len(batches) != 0 {
		t.Errorf("calls that failed before any I/O sent %q alone and batches %q", sends, batches)
	}
	c.err = io.ErrUnexpectedEOF
	if ok, err := p.SetNXPublish(bg, "k", "v", time.Second, "ch", "hint"); ok || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "lines: ") {
		t.Errorf("SetNXPublish whose batch failed: %v, %v; want the transport error, wrapped", ok, err)
	}
	c.err = nil
	p.Close()
	c.reset()
	if ok, err := p.SetNXPublish(bg, "k", "v", time.Second, "ch", "hint"); ok || !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("SetNXPublish after Close: %v, %v; want ErrClosed", ok, err)
	}
	if sends, batches := c.recorded(); len(sends)+len(batches) != 0 {
		t.Errorf("SetNXPublish after Close sent %q alone and batches %q", sends, batches)
	}
}

// TestPipelineSetNXPublishQueuedStaysWhole: a SetNXPublish queued behind
// a round trip in flight goes out with the calls queued with it, its SET
// and PUBLISH adjacent, in its place in the queue, even where a batch
// bounded by a count of calls would end between the two: 511 calls are
// queued before it, and the batch of 512 entries is sent whole.
func TestPipelineSetNXPublishQueuedStaysWhole(t *testing.T) {
	c := newLineClient(true)
	p := c.pipeline(t, backend.PipelineConfig{Conns: 1})
	bg := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := p.Do(bg, call("first", false))
		first <- err
	}()
	c.echo.began(t)
	const before, after = 511, 3
	errs := make(chan error, before+after)
	do := func(token string) {
		reply, err := p.Do(bg, call(token, false))
		errs <- check(token, false, reply, err)
	}
	for i := range before {
		go do(fmt.Sprint("before ", i))
		awaitQueued(t, p, i+1) // in this order
	}
	set := make(chan error, 1)
	go func() {
		ok, err := p.SetNXPublish(bg, "k", "v", time.Second, "ch", "hint")
		if !ok || err != nil {
			err = fmt.Errorf("queued SetNXPublish: %v, %v; want true", ok, err)
		}
		set <- err
	}()
	awaitQueued(t, p, before+1)
	for i := range after {
		go do(fmt.Sprint("after ", i))
		awaitQueued(t, p, before+1+i+1)
	}
	c.echo.end(t)  // the first call
	c.echo.step(t) // the batch of 512 entries
	c.echo.step(t) // the calls after it
	if err := recv(t, first); err != nil {
		t.Error(err)
	}
	if err := recv(t, set); err != nil {
		t.Error(err)
	}
	for range before + after {
		if err := recv(t, errs); err != nil {
			t.Error(err)
		}
	}
	_, batches := c.recorded()
	if len(batches) != 2 {
		t.Fatalf("%d batches, want 2: %d calls, the pair, and %d calls", len(batches), before, after)
	}
	pair := []string{"SET k v NX PX 1000", "PUBLISH ch hint"}
	if b := batches[0]; len(b) != before+2 || !reflect.DeepEqual(b[before:], pair) {
		t.Errorf("the first batch has %d calls, ending %q; want %d, ending with the pair %q", len(b), b[max(0, len(b)-3):], before+2, pair)
	}
	if b := batches[1]; len(b) != after {
		t.Errorf("the second batch: %q, want the %d calls made after the pair", b, after)
	}
}

// TestPipelineSetNXPublishOrder: a SetNXPublish queued alone behind a
// round trip goes out as a batch of its own, and a call made after it
// returns runs after it, as Do's calls do; its caller, gone before it was
// sent, leaves it unsent.
func TestPipelineSetNXPublishOrder(t *testing.T) {
	c := newLineClient(true)
	p := c.pipeline(t, backend.PipelineConfig{Conns: 1})
	bg := context.Background()
	wire := leave(p, bg, "on the wire")
	c.echo.began(t)
	gone, cancel := context.WithCancel(bg)
	left := make(chan error, 1)
	go func() {
		_, err := p.SetNXPublish(gone, "gone", "v", time.Second, "ch", "gone")
		left <- err
	}()
	awaitQueued(t, p, 1)
	stays := make(chan error, 1)
	go func() {
		ok, err := p.SetNXPublish(bg, "k", "v", time.Second, "ch", "hint")
		if !ok || err != nil {
			err = fmt.Errorf("SetNXPublish: %v, %v; want true", ok, err)
		}
		stays <- err
	}()
	awaitQueued(t, p, 2)
	cancel()
	if err := recv(t, left); !errors.Is(err, context.Canceled) {
		t.Errorf("a queued SetNXPublish cancelled: %v, want context.Canceled", err)
	}
	c.echo.end(t) // the call on the wire
	if o := recv(t, wire); o.err != nil {
		t.Error(o.err)
	}
	c.echo.step(t) // the pair that stayed, alone
	if err := recv(t, stays); err != nil {
		t.Error(err)
	}
	after := leave(p, bg, "after")
	c.echo.step(t)
	if o := recv(t, after); o.err != nil {
		t.Error(o.err)
	}
	sends, batches := c.recorded()
	want := [][]string{{"SET k v NX PX 1000", "PUBLISH ch hint"}}
	if len(sends) != 2 || !reflect.DeepEqual(batches, want) {
		t.Errorf("sent alone %q, batches %q; want the two calls alone and the batch %q, the cancelled pair unsent", sends, batches, want)
	}
}
