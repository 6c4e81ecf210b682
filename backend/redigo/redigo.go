// Package redigo adapts a github.com/gomodule/redigo connection pool to
// backend.Backend.
//
// Scripts run on connections borrowed from the caller's pool, with EVALSHA
// and a transparent EVAL fallback on NOSCRIPT. Pub/sub uses one dedicated
// connection per Backend, dialed with the pool's Dial or DialContext
// function but never taken from or returned to the pool. It is opened by
// the first Subscribe and, under backend.Mux, multiplexes every
// subscription, is pinged periodically, and is re-established with capped
// backoff when lost; every live subscription then receives a gap message.
//
// # Pipelining
//
// Concurrent calls through one Backend share round trips, through a
// backend.Pipeline: while round trips are on the wire, the calls made
// meanwhile queue, and go out together as one batch on one pooled
// connection (Send, Flush, then one Receive per call) as soon as one
// returns. Two round trips may be in flight, each on a connection of its
// own, so that one batch is written while the replies of the other are
// read, where the pool keeps at least two connections idle (MaxIdle 2 or
// more) and a second borrow cannot fail (MaxActive 0, or 2 or more with
// Wait). Over any other pool one is, as before: a pool that keeps fewer
// than two idle would dial one for every batch, and a bounded pool without
// Wait, which the application may share with its own code or with other
// Backends, would fail a call with ErrPoolExhausted. Either way, calls made
// one after another reach the server in order (see backend.Pipeline); calls
// in flight together may run in either order. A call made while nothing is
// queued and a round trip is free, whose context can never be cancelled
// (context.Background, or a deadline without Done, as dsync's primitives
// pass), is sent on the caller's goroutine with a read deadline (see
// WithTimeout), as without pipelining: the Pipeline adds about 50ns and no
// allocation to it. A call whose context can be cancelled is sent by a
// goroutine of the Pipeline (redigo gives up a call mid-way only on a
// goroutine of its own), and its caller returns as soon as the context
// ends.
//
// Measured with go test -bench Pipelining ./backend/redigo/ (a script
// returning 1, a context with a deadline and no Done, one local
// redis-server 7.0, a 2-vCPU VM shared with other work at load average
// 5-8; the range of three runs):
//
//	                                pipelining       WithPipelining(false)
//	1 goroutine    time per call    54-102µs         45-92µs
//	16 goroutines  time per call    15-16µs          25-32µs
//	64 goroutines  time per call    5.3-7.0µs        23-26µs
//	               server reads     0.04 per call    1 per call
//	               Redis CPU        1.9-2.3µs/call   10-12µs/call
//	               allocations      3 per call       5 per call
//
// The second round trip, against one, in the service shape of dsync bench
// (goroutines each locking and unlocking a mutex of its own over one pool
// with MaxIdle 64; both settings alternated in one process, eight rounds
// of 1.5s; medians, same VM): 26,387 against 23,470 pairs a second with a
// deadline per pair and 17,684 against 14,774 with context.Background()
// at 64 goroutines, 30,597 against 27,531 at 256; faster in 7 of the 8
// rounds each time, for the same Redis CPU per pair (within 0.7µs of
// 16-25µs). At 16 goroutines the batches are small and the machine is
// left partly idle: there the default ran about 0.8x redsync's pairs a
// second on the same pool, and WithPipelining(false) 0.83-1.15x (see
// bench/README.md).
//
// A lone caller's time is the same within the noise of a shared machine
// (package backend's BenchmarkPipelineLoneCaller isolates what the
// Pipeline adds). WithPipelining(false) gives every call a pooled
// connection of its own, as before there was a Pipeline.
//
// Close releases the pub/sub connection and its goroutine; the pool stays
// the caller's to close.
package redigo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// Option configures a Backend.
type Option func(*options)

type options struct {
	timeout time.Duration
	solo    bool // pipelining off
	mux     backend.MuxOptions
}

// WithTimeout bounds a script call whose context can never end (taking a
// connection from the pool, and the call), so that a busy pool or a server
// that stopped answering fails instead of blocking forever. The default is
// 10s.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithPipelining turns the sharing of round trips among concurrent calls
// on (the default) or off (see Pipelining in the package documentation).
func WithPipelining(on bool) Option {
	return func(o *options) { o.solo = !on }
}

// WithHealthCheck sets how often the pub/sub connection is pinged. A
// connection that answers nothing for three intervals is considered lost and
// re-established. The default is 5s.
func WithHealthCheck(d time.Duration) Option {
	return func(o *options) {
		o.mux.HealthCheck = d
	}
}

// WithMailboxSize sets how many undelivered messages a subscription queues
// before they are replaced by a gap. The default is
// backend.DefaultMailboxSize.
func WithMailboxSize(n int) Option {
	return func(o *options) { o.mux.MailboxSize = n }
}

// WithMaxBackoff caps the delay between attempts to re-establish the pub/sub
// connection. The first attempt is immediate if the lost connection served
// a second or more (see backend.MuxOptions); the default cap is 500ms.
func WithMaxBackoff(d time.Duration) Option {
	return func(o *options) {
		o.mux.MaxBackoff = d
	}
}

// Backend is a backend.Backend over a *redis.Pool. It is safe for
// concurrent use.
type Backend struct {
	pool   *redis.Pool
	opts   options
	closed atomic.Bool
	pipe   *backend.Pipeline
	mux    *backend.Mux
}

var (
	_ backend.Backend      = (*Backend)(nil)
	_ backend.Setter       = (*Backend)(nil)
	_ backend.SetPublisher = (*Backend)(nil)
)

// New returns a Backend that runs scripts on connections from pool. A nil
// pool makes every call fail with an error matching dsync.ErrInvalidBackend.
func New(pool *redis.Pool, opts ...Option) *Backend {
	b := &Backend{pool: pool, opts: options{timeout: 10 * time.Second}}
	for _, o := range opts {
		o(&b.opts)
	}
	b.pipe = backend.NewPipeline(backend.PipelineConfig{Check: b.check, Send: b.send, Batch: b.batch, Wrap: wrap,
		Honours: true, Timeout: b.opts.timeout, Off: b.opts.solo, Conns: roundTrips(pool)})
	b.mux = backend.NewMux(dialer{pool}, b.opts.mux)
	return b
}

// roundTrips returns how many round trips the Pipeline keeps in flight over
// pool, each on a connection of its own (see Pipelining in the package
// documentation): two only where a second borrow neither dials a
// connection for every batch (MaxIdle below 2) nor can fail for want of
// one (MaxActive 1, or a MaxActive without Wait: the application's pool,
// which it may share, counted on one connection at a time).
func roundTrips(pool *redis.Pool) int {
	if pool == nil || pool.MaxIdle < 2 || pool.MaxActive == 1 || pool.MaxActive > 0 && !pool.Wait {
		return 1
	}
	return 2
}

var errNilPool = fmt.Errorf("%w: redigo: nil *redis.Pool", dsync.ErrInvalidBackend)

func (b *Backend) check(ctx context.Context) error {
	if b.pool == nil {
		return errNilPool
	}
	if b.closed.Load() {
		return backend.ErrClosed
	}
	return ctx.Err()
}

// Eval implements backend.Backend.
func (b *Backend) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	return b.pipe.Eval(ctx, s, keys, args...)
}

// SetNX implements backend.Setter.
func (b *Backend) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return b.pipe.SetNX(ctx, key, value, ttl)
}

// SetNXPublish implements backend.SetPublisher: the SET and the PUBLISH
// go out as one batch of the Pipeline, in one round trip.
func (b *Backend) SetNXPublish(ctx context.Context, key, value string, ttl time.Duration, channel, message string) (bool, error) {
	return b.pipe.SetNXPublish(ctx, key, value, ttl, channel, message)
}

// send sends one call on a connection of its own (backend.PipelineConfig):
// ctx can never end and has a deadline, which bounds the call.
func (b *Backend) send(ctx context.Context, c backend.Call) (any, error) {
	conn, err := b.get(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	timeout := backend.CallTimeout(ctx, b.opts.timeout)
	line := c.CommandLine(false)
	reply, err := redis.DoWithTimeout(conn, timeout, line[0].(string), line[1:]...)
	if c.Script != nil && isNoScript(err) {
		line[1] = c.Script.Source()
		reply, err = redis.DoWithTimeout(conn, timeout, "EVAL", line[1:]...)
	}
	return normalize(reply, err)
}

// batch sends calls at once on one connection (backend.PipelineConfig).
// A transport error leaves the connection broken, and the pool closes it.
func (b *Backend) batch(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
	conn, err := b.get(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	for _, c := range calls {
		line := c.CommandLine(source)
		if err := conn.Send(line[0].(string), line[1:]...); err != nil {
			return nil, err
		}
	}
	if err := conn.Flush(); err != nil {
		return nil, err
	}
	dl, _ := ctx.Deadline()
	results := make([]backend.Result, len(calls))
	for i := range results {
		reply, err := redis.ReceiveWithTimeout(conn, max(time.Until(dl), time.Millisecond))
		results[i].Reply, results[i].Err = normalize(reply, err)
		if _, ok := results[i].Err.(*backend.ServerError); results[i].Err != nil && !ok {
			return nil, results[i].Err
		}
	}
	return results, nil
}

// get takes a connection from the pool, within ctx's deadline: a pool
// that waits for a free connection, or dials a new one, would otherwise
// wait without bound. A pool that does not wait uses the context only to
// dial, which a deadline bounds without the timer of a cancellable
// context.
func (b *Backend) get(ctx context.Context) (redis.Conn, error) {
	if !b.pool.Wait {
		return b.pool.GetContext(ctx)
	}
	gctx, cancel := context.WithTimeout(context.Background(), backend.CallTimeout(ctx, b.opts.timeout))
	defer cancel()
	return b.pool.GetContext(gctx)
}

// normalize normalizes a reply, and makes an error reply a
// *backend.ServerError.
func normalize(reply any, err error) (any, error) {
	if err == nil {
		return backend.NormalizeReply(reply, serverError)
	}
	var re redis.Error
	switch {
	case errors.As(err, &re):
		return nil, &backend.ServerError{Message: string(re)}
	case err != nil:
		return nil, err
	}
	return backend.NormalizeReply(reply, serverError)
}

func isNoScript(err error) bool {
	if err == nil {
		return false
	}
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(string(re), "NOSCRIPT")
}

// wrap makes a transport error that ctx caused match ctx.Err().
func wrap(ctx context.Context, err error) error {
	return backend.TransportError(ctx, "redigo", err)
}

func serverError(v any) (string, bool) {
	re, ok := v.(redis.Error)
	return string(re), ok
}

// Subscribe implements backend.Backend.
func (b *Backend) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	return b.mux.Subscribe(ctx, channel)
}

// Close closes the pub/sub connection, ends every subscription, fails the
// calls still queued and waits for the adapter's goroutines to exit. It does not close the pool. Close is
// idempotent; afterwards every call returns an error matching
// backend.ErrClosed.
func (b *Backend) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.mux.Close()
		b.pipe.Close()
	}
	return nil
}
