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
// # Pipelining
//
// Concurrent calls through one Backend share round trips through a
// backend.Pipeline, as with the redigo and go-redis adapters: while a
// round trip is on the wire, the calls made meanwhile queue, and go out
// together as one DoMulti (one pipeline per node on a cluster) as soon as
// it returns. One round trip at a time keeps the calls in order (see
// backend.Pipeline), and the client's own auto-pipelining then has one
// caller: a lone call is read on the goroutine that sends it, with no
// hand-off to rueidis's writer and reader goroutines, unless the program
// uses the client concurrently elsewhere. Batches grow with the load and
// make fewer, larger writes than auto-pipelining alone, which flushes as
// soon as it has anything to write. Measured with go test -bench
// Pipelining ./backend/rueidis/ (a script returning 1, one local
// redis-server 7.0, a 2-vCPU VM; rueidis's defaults, client-side caching
// off), 64 goroutines, with a context that can be cancelled / one with a
// deadline and no Done:
//
//	                    Pipeline              WithPipelining(false)
//	time per call       7.5 / 7.0µs           18.5 / 15.7µs
//	server reads        0.032 / 0.036 a call  0.41 / 0.17 a call
//	Redis CPU           2.8 / 2.6µs a call    8.3 / 5.4µs a call
//
// The dsync mutex over this adapter (dsync bench, same VM; bench/README.md
// "rueidis through the Pipeline" has the runs): 64 goroutines each
// locking a name of its own, 40,300-40,800 lock+unlock pairs/s at 9.8-10.3µs
// of Redis CPU a pair, where auto-pipelining alone gave 29,800-31,600 at
// 19-20µs; one goroutine alone, 0.94-1.23x the time of the redigo
// adapter's pair, where it took 1.26-1.63x. WithPipelining(false) gives
// each call a round trip of its own: the client's auto-pipelining alone
// then shares them.
//
// Contexts: a call whose context can be cancelled is sent by a goroutine of
// the Pipeline, and its caller returns as soon as the context ends, with an
// error matching ctx.Err(); the abandoned call finishes in the background
// and Close waits for it. A call whose context can never end runs on the
// caller's goroutine when nothing is in flight, bounded by its deadline if
// it has one (rueidis then gets a context that ends at the deadline), or
// else by the client's ConnWriteTimeout. One limit is rueidis's: it dials
// each of its connections (one per PipelineMultiplex wire and node) when a
// call first needs it, and the calls that need it wait for the dial, whose
// handshake no context bounds; so on a fresh client, a call with a
// deadline and no Done can outlast its deadline while the server is busy
// (a long script), until the handshake completes.
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
	mux  backend.MuxOptions
	solo bool
}

// WithPipelining turns the sharing of round trips by backend.Pipeline on
// (the default) or off: off, every call goes to the client alone, as
// before there was a Pipeline (see the package documentation).
func WithPipelining(on bool) Option {
	return func(opts *options) { opts.solo = !on }
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
	pipe    *backend.Pipeline
	mux     *backend.Mux
}

var (
	_ backend.Backend      = (*Backend)(nil)
	_ backend.Sharded      = (*Backend)(nil)
	_ backend.Batcher      = (*Backend)(nil)
	_ backend.Setter       = (*Backend)(nil)
	_ backend.SetPublisher = (*Backend)(nil)
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
	b.pipe = backend.NewPipeline(backend.PipelineConfig{Check: b.check, Send: b.send, Batch: b.batch, Wrap: wrap,
		Honours: true, Bounded: true, Off: b.opts.solo})
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

// bounded runs fn with ctx. A deadline without Done ends the call: rueidis
// keeps one only for a call it reads on its caller's goroutine, so fn then
// gets a context whose Done closes at the deadline. Any other context is
// passed as it is: one without a deadline is the client's to bound
// (PipelineConfig.Bounded). A call that failed with a context error that
// is not ctx's (rueidis fails the calls queued behind one whose deadline
// passed with that call's error, unsent, when the program shares the
// client) is not sent again here: it is a transport error to dsync, which
// retries it.
func bounded[T any](ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	if dl, ok := ctx.Deadline(); ok && ctx.Done() == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.Background(), dl)
		defer cancel()
	}
	return fn(ctx)
}

// Eval implements backend.Backend.
func (b *Backend) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	return b.pipe.Eval(ctx, s, keys, args...)
}

// SetNX implements backend.Setter, with SET NX PX, through the Pipeline
// as Eval is.
func (b *Backend) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return b.pipe.SetNX(ctx, key, value, ttl)
}

// SetNXPublish implements backend.SetPublisher: the SET and the PUBLISH
// go out as one batch of the Pipeline, one DoMulti, in one round trip; on
// a cluster the PUBLISH goes to its channel's slot's master, the SET's
// when the channel shares its key's hash tag, else a round trip to each
// node, in parallel.
func (b *Backend) SetNXPublish(ctx context.Context, key, value string, ttl time.Duration, channel, message string) (bool, error) {
	return b.pipe.SetNXPublish(ctx, key, value, ttl, channel, message)
}

// send sends one call (backend.PipelineConfig).
func (b *Backend) send(ctx context.Context, c backend.Call) (any, error) {
	return bounded(ctx, func(ctx context.Context) (any, error) {
		// Built for each attempt: rueidis recycles a command it sent.
		cmd, err := b.command(c, false)
		if err != nil {
			return nil, err
		}
		reply, err := result(b.c.Do(ctx, cmd))
		if backend.IsNoScript(err) {
			cmd, _ = b.command(c, true) // as it was built once
			reply, err = result(b.c.Do(ctx, cmd))
		}
		return reply, err
	})
}

// command builds c's command: EVALSHA, or EVAL when source is true, or a
// plain command, whose line (SET key value NX PX ms, or PUBLISH channel
// message, the only ones dsync sends) has its key first (backend.Call.Key):
// a PUBLISH goes to its channel's slot's master on a cluster.
func (b *Backend) command(c backend.Call, source bool) (rueidis.Completed, error) {
	var buf [16]string // the builder copies the strings
	if c.Script == nil {
		line, err := backend.AppendArgStrings(buf[:0], c.CommandLine(false))
		if err != nil {
			return rueidis.Completed{}, err
		}
		return b.c.B().Arbitrary(line[0]).Keys(line[1]).Args(line[2:]...).Build(), nil
	}
	args, err := backend.AppendArgStrings(buf[:0], c.Args)
	switch {
	case err != nil:
		return rueidis.Completed{}, err
	case source:
		return b.c.B().Eval().Script(c.Script.Source()).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(args...).Build(), nil
	}
	return b.evalsha(c.Script, c.Keys, args)
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

// result normalizes a reply: a nil reply is no error, an error reply is a
// *backend.ServerError, elements included, and a reply of a type rueidis
// cannot decode matches dsync.ErrUnexpectedReply, as one that cannot be
// normalized does.
func result(r rueidis.RedisResult) (any, error) {
	v, err := r.ToAny()
	switch re, isErr := rueidis.IsRedisErr(err); {
	case rueidis.IsRedisNil(err):
		return nil, nil
	case isErr:
		return nil, &backend.ServerError{Message: re.Error()}
	case err != nil && r.NonRedisError() == nil:
		return nil, fmt.Errorf("%w: %w", dsync.ErrUnexpectedReply, err)
	case err != nil:
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

// wrap is the Pipeline's (PipelineConfig.Wrap, which error replies and
// unexpected replies do not reach): an error of a closed client matches
// backend.ErrClosed, which no retry can cure, and any other is a transport
// error, which matches ctx.Err() if ctx caused it.
func wrap(ctx context.Context, err error) error {
	if errors.Is(err, rueidis.ErrClosing) {
		return fmt.Errorf("rueidis: %w (%w)", backend.ErrClosed, err)
	}
	return backend.TransportError(ctx, "rueidis", err)
}

// EvalBatch implements backend.Batcher: rueidis sends the calls as one
// pipeline per node, in parallel.
func (b *Backend) EvalBatch(ctx context.Context, calls []backend.Call) ([]backend.Result, error) {
	return b.pipe.EvalBatch(ctx, calls)
}

// batch sends calls at once (backend.PipelineConfig): rueidis writes them
// as one pipeline per node, in parallel.
func (b *Backend) batch(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
	return bounded(ctx, func(ctx context.Context) ([]backend.Result, error) {
		// Built for each attempt: rueidis recycles the commands it sent.
		results := make([]backend.Result, len(calls))
		idx := make([]int, 0, len(calls)) // the calls sent, by their place
		cmds := make(rueidis.Commands, 0, len(calls))
		route := b.route(calls)
		for i, c := range calls {
			cmd, err := b.command(c, source)
			if results[i].Err = err; err == nil {
				if route != "" && c.Script != nil && len(c.Keys) == 0 {
					cmd = cmd.SetSlot(route)
				}
				idx, cmds = append(idx, i), append(cmds, cmd)
			}
		}
		for j, r := range b.c.DoMulti(ctx, cmds...) {
			if err := r.NonRedisError(); err != nil {
				return nil, err // a transport error: no result is trusted
			}
			// An error reply, or one that cannot be normalized, is its
			// call's alone: the batch may hold other callers' calls.
			reply, err := result(r)
			results[idx[j]] = backend.Result{Reply: reply, Err: err}
		}
		return results, nil
	})
}

// route returns, on a cluster, the first key of calls: rueidis's cluster
// client panics at a pipeline that mixes commands without a slot with
// commands of several slots, as a batch of unrelated callers' calls can,
// so a script without keys, which any node may run, goes with it.
func (b *Backend) route(calls []backend.Call) string {
	for i := 0; b.sharded && i < len(calls); i++ {
		if k := calls[i].Key(); k != "" {
			return k
		}
	}
	return ""
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
		b.pipe.Close()
	}
	return nil
}
