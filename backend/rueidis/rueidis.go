// Package rueidis adapts a github.com/redis/rueidis client to
// backend.Backend, on a standalone server, Redis Cluster or a primary found
// through Sentinel (whatever rueidis.NewClient made). It lives in a module
// of its own, so that a program using another client does not get rueidis
// in its module graph. Its name is the client's: import it under another,
//
//	import dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
//
// Scripts run with EVALSHA and a transparent EVAL fallback on NOSCRIPT,
// routed by rueidis to the node that serves their keys. On a cluster the
// backend reports backend.Sharded and renews the leases of many locks
// through EvalBatch, which rueidis sends as one pipeline per node.
//
// Pub/sub runs on dedicated connections taken from the client's pool (one,
// or one per master on a cluster, each channel on its slot's master), under
// backend.Mux: multiplexed, pinged, re-established when lost, with a gap
// for every live subscription.
//
// # Auto-pipelining
//
// By default rueidis pipelines every call on one shared connection per
// node. A lone call on a fresh client is read on the caller's goroutine,
// but once the client has served concurrent calls (as a client in a
// service has), every call goes through a writer and a reader goroutine of
// rueidis's: concurrent calls share round trips, and a lone call pays for
// the hand-offs. Measured with dsync bench (the adapters table: the mutex
// over each adapter, interleaved rounds, one local redis-server 7.0, a
// 2-vCPU VM shared with other test runs, three runs), against go-redis:
//
//	                              rueidis        rueidis, DisableAutoPipelining
//	uncontended lock+unlock       1.06-1.12x     0.86-0.97x
//	  (ctx with a deadline)       0.97-1.05x     0.82-0.93x
//	8 goroutines, distinct names  0.76-0.93x     0.99-1.03x
//
// (time per lock+unlock over go-redis's: below 1 is faster). A
// latency-bound program, whose locks are few and each on a request's path,
// should give dsync a client of its own made with
// rueidis.ClientOption{DisableAutoPipelining: true}: each call then takes
// a pooled connection of its own, as with go-redis and redigo. A program
// that takes many locks at once keeps the default.
//
// Contexts: rueidis gives up a call at its context's deadline, but not
// always at a cancellation (a lone call on an idle connection, or any call
// without auto-pipelining, reads its reply on the caller's goroutine). A
// call whose context can be cancelled therefore waits for its reply on a
// goroutine of its own and returns as soon as the context ends
// (backend.Calls); the abandoned call finishes in the background and Close
// waits for it. A call whose context can never end runs on the caller's
// goroutine, bounded by its deadline if it has one, or else by the
// client's ConnWriteTimeout. One limit is rueidis's: it dials each of its
// connections (one per PipelineMultiplex wire and node) when a call first
// needs it, and the calls that need it wait for the dial, whose handshake
// no context bounds; so on a fresh client, a call with a deadline and no
// Done can outlast its deadline while the server is busy (a long script),
// until the handshake completes.
//
// Error replies become *backend.ServerError with rueidis's text, which
// lacks the generic "ERR " prefix the server sent; other prefixes (such as
// NOSCRIPT or a script's own) are kept.
//
// Close releases the pub/sub connections and waits for the adapter's
// goroutines; the client stays the caller's to close.
package rueidis

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// Option configures a Backend.
type Option func(*options)

type options struct {
	mux backend.MuxOptions
}

// WithPubSub configures the pub/sub connections: their health checks,
// mailboxes and reconnection backoff (see backend.MuxOptions).
func WithPubSub(o backend.MuxOptions) Option {
	return func(opts *options) { opts.mux = o }
}

// Backend is a backend.Backend over a rueidis.Client. It is safe for
// concurrent use.
type Backend struct {
	c       rueidis.Client
	opts    options
	sharded bool
	closed  atomic.Bool
	calls   backend.Calls
	mux     *backend.Mux
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Sharded = (*Backend)(nil)
	_ backend.Batcher = (*Backend)(nil)
	_ backend.Setter  = (*Backend)(nil)
)

var errNilClient = fmt.Errorf("%w: rueidis: nil client", dsync.ErrInvalidBackend)

// New returns a Backend that runs scripts through c. A nil client makes
// every call fail with an error matching dsync.ErrInvalidBackend.
func New(c rueidis.Client, opts ...Option) *Backend {
	b := &Backend{c: c}
	for _, o := range opts {
		o(&b.opts)
	}
	var d backend.PubSubDriver = dialer{b}
	if c != nil && c.Mode() == rueidis.ClientModeCluster {
		b.sharded = true
		d = &clusterDialer{dialer: dialer{b}}
	}
	b.mux = backend.NewMux(d, b.opts.mux)
	return b
}

// Sharded implements backend.Sharded: it reports true for a cluster
// client.
func (b *Backend) Sharded() bool { return b.sharded }

func (b *Backend) check(ctx context.Context) error {
	if b.c == nil {
		return errNilClient
	}
	if b.closed.Load() {
		return backend.ErrClosed
	}
	return ctx.Err()
}

// do runs fn bounded by ctx (see the package documentation).
func (b *Backend) do(ctx context.Context, fn func(ctx context.Context) (any, error)) (any, error) {
	retried := func(ctx context.Context) (any, error) {
		reply, err := fn(ctx)
		if stale(ctx, err) {
			reply, err = fn(ctx)
		}
		return reply, err
	}
	if dl, ok := ctx.Deadline(); ok && ctx.Done() == nil {
		// A deadline that nothing can cancel (backend rule 7).
		cctx, cancel := context.WithDeadline(context.Background(), dl)
		defer cancel()
		reply, err := retried(cctx)
		return reply, wrap(cctx, err)
	}
	reply, err := b.calls.Do(ctx, retried)
	return reply, wrap(ctx, err)
}

// stale reports a context error that is not ctx's: a call whose deadline
// passed ends its connection, and rueidis fails the calls queued behind it
// with that call's error, unsent. They are sent again, once (dsync's
// scripts may run twice).
func stale(ctx context.Context, err error) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() == nil && (!ok || time.Now().Before(dl)) &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// Eval implements backend.Backend.
func (b *Backend) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	sargs, err := backend.ArgStrings(args)
	if err != nil {
		return nil, err
	}
	return b.do(ctx, func(ctx context.Context) (any, error) {
		cmd, err := b.evalsha(s, keys, sargs)
		if err != nil {
			return nil, err
		}
		reply, err := result(b.c.Do(ctx, cmd))
		if backend.IsNoScript(err) {
			reply, err = result(b.c.Do(ctx, b.eval(s, keys, sargs)))
		}
		return reply, err
	})
}

// SetNX implements backend.Setter, with SET NX PX, auto-pipelined as Eval
// is.
func (b *Backend) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := b.check(ctx); err != nil {
		return false, err
	}
	ms, err := backend.PX(ttl)
	if err != nil {
		return false, err
	}
	return backend.SetReply(b.do(ctx, func(ctx context.Context) (any, error) {
		return result(b.c.Do(ctx, b.c.B().Set().Key(key).Value(value).Nx().PxMilliseconds(ms).Build()))
	}))
}

// evalsha builds EVALSHA. On a cluster rueidis's builder panics at keys of
// different slots; the server's refusal is returned instead.
func (b *Backend) evalsha(s *backend.Script, keys, args []string) (cmd rueidis.Completed, err error) {
	defer func() {
		if recover() != nil {
			err = &backend.ServerError{Message: "CROSSSLOT Keys in request don't hash to the same slot"}
		}
	}()
	return b.c.B().Evalsha().Sha1(s.Hash()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), nil
}

func (b *Backend) eval(s *backend.Script, keys, args []string) rueidis.Completed {
	return b.c.B().Eval().Script(s.Source()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// result normalizes a reply: a nil reply is no error, an error reply is a
// *backend.ServerError, elements included.
func result(r rueidis.RedisResult) (any, error) {
	v, err := r.ToAny()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		return nil, &backend.ServerError{Message: re.Error()}
	}
	if err != nil {
		return nil, err
	}
	return backend.NormalizeReply(v, serverError)
}

// serverError recognizes an error reply inside an array (see
// backend.NormalizeReply).
func serverError(v any) (string, bool) {
	if re, ok := v.(*rueidis.RedisError); ok {
		return re.Error(), true
	}
	return "", false
}

// wrap makes a transport error that ctx caused match ctx.Err(), and one of
// a closed client match backend.ErrClosed, which no retry can cure.
func wrap(ctx context.Context, err error) error {
	var se *backend.ServerError
	switch {
	case err == nil || errors.As(err, &se) || errors.Is(err, dsync.ErrUnexpectedReply):
		return err
	case errors.Is(err, rueidis.ErrClosing):
		return fmt.Errorf("rueidis: %w (%w)", backend.ErrClosed, err)
	}
	return backend.TransportError(ctx, "rueidis", err)
}

// EvalBatch implements backend.Batcher: rueidis sends the calls as one
// pipeline per node, in parallel.
func (b *Backend) EvalBatch(ctx context.Context, calls []backend.Call) ([]backend.Result, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	results, err := b.do(ctx, func(ctx context.Context) (any, error) {
		return backend.PipelineBatch(ctx, calls, b.pipeline)
	})
	rs, _ := results.([]backend.Result)
	return rs, err
}

func (b *Backend) pipeline(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
	results := make([]backend.Result, len(calls))
	var idx []int // the calls sent, by their place in the pipeline
	var cmds rueidis.Commands
	for i, c := range calls {
		args, err := backend.ArgStrings(c.Args)
		var cmd rueidis.Completed
		switch {
		case err == nil && source:
			cmd = b.eval(c.Script, c.Keys, args)
		case err == nil:
			cmd, err = b.evalsha(c.Script, c.Keys, args)
		}
		if results[i].Err = err; err == nil {
			idx, cmds = append(idx, i), append(cmds, cmd)
		}
	}
	for j, r := range b.c.DoMulti(ctx, cmds...) {
		reply, err := result(r)
		if _, ok := err.(*backend.ServerError); err != nil && !ok {
			return nil, err // a transport error: no result is trusted
		}
		results[idx[j]] = backend.Result{Reply: reply, Err: err}
	}
	return results, nil
}

// Subscribe implements backend.Backend.
func (b *Backend) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	return b.mux.Subscribe(ctx, channel)
}

// Close closes the pub/sub connections, ends every subscription and waits
// for the adapter's goroutines to exit, calls abandoned by their context
// included. It does not close the client. Close is idempotent; afterwards
// every call returns an error matching backend.ErrClosed.
func (b *Backend) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.mux.Close()
		b.calls.Close()
	}
	return nil
}
