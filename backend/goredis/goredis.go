// Package goredis adapts a github.com/redis/go-redis/v9 client to
// backend.Backend: a *redis.Client (standalone server), a
// *redis.ClusterClient (Redis Cluster) or the *redis.Client that
// redis.NewFailoverClient returns (a primary found through Sentinel).
// It lives in a module of its own, so that a program using another client
// does not get go-redis in its module graph.
//
// Scripts run with EVALSHA and a transparent EVAL fallback on NOSCRIPT, on
// the node that owns their first key's slot (a cluster client routes them;
// a script without keys runs on any node). The backend reports
// backend.Sharded for a cluster client, so that dsync never sends one
// script keys of different slots, and renews the leases of many locks
// through EvalBatch, one pipeline per node (see backend.Batcher).
//
// Pub/sub uses one *redis.PubSub per Backend on a single server, and one
// per master on a cluster, under backend.Mux. Each multiplexes its
// subscriptions, is pinged periodically, and is replaced with capped
// backoff when its connection fails; every live subscription on it then
// receives a gap message.
// Messages travel as PUBLISH, which the cluster bus copies to every node,
// so a subscriber connected to any node receives them. On a cluster each
// channel is subscribed on the master serving its hash slot, where the
// scripts that publish on it run (a channel shares its lock's hash tag):
// the wake-up then reaches the waiter without crossing the cluster bus.
// This costs one pub/sub connection per master instead of one; the
// dsync README gives the measured difference. Sharded SPUBLISH would also
// spare the copies to other nodes, but it ties each subscription to its
// slot's current owner, so a resharding or failover would cut
// subscriptions off until they moved.
// With PUBLISH, placement only affects speed: a channel whose slot moved
// is still delivered, through the bus, and the connection follows its
// slot's master when it reconnects.
//
// # Pipelining
//
// Concurrent calls through one Backend share round trips, through a
// backend.Pipeline: while a call is on the wire, the calls made meanwhile
// queue, and go out together as one go-redis pipeline (which a cluster
// client splits per node, sending to the nodes in parallel) as soon as it
// returns. One round trip at a time keeps the calls in order (see
// backend.Pipeline). A call made while nothing is in flight, and whose
// context allows (see below), runs on the caller's goroutine as without
// pipelining, at the cost of two uncontended mutex operations. Measured
// with go test -bench Pipelining ./backend/goredis/ (a script returning 1,
// a context with a deadline and no Done, a client with
// ContextTimeoutEnabled, one local redis-server 7.0, a 2-vCPU VM shared
// with other work at load average 7-8; the range of three runs, six for
// one goroutine):
//
//	                                pipelining       WithPipelining(false)
//	1 goroutine    time per call    42-79µs          37-146µs
//	16 goroutines  time per call    9.7-16µs         26-43µs
//	64 goroutines  time per call    6.2-7.4µs        28-40µs
//	               server reads     0.04 per call    1 per call
//	               Redis CPU        2.1-2.4µs/call   10-13µs/call
//	               allocations      3 per call       6 per call
//
// WithPipelining(false) turns it off; WithReplicaAck does too, since each
// call then waits for its own acknowledgement.
//
// Contexts: go-redis interrupts a call at the context's deadline only when
// the client was made with ContextTimeoutEnabled, and never at a
// cancellation. A call whose context can be cancelled therefore is sent by a
// goroutine of the Pipeline, and its caller returns at once when the
// context ends, with an error matching ctx.Err(); the abandoned call
// finishes in the background (go-redis reads the whole reply, so the
// connection returns to the pool in a known state) and Close waits for
// it. A call whose context can never end runs on the caller's goroutine,
// bounded by its deadline or WithTimeout when the client honours
// deadlines, or by the client's ReadTimeout when the context has no
// deadline; one with a deadline that the client does not honour is sent
// by the Pipeline's goroutine, and its caller waits with a timer. dsync's primitives call with such a
// context (a deadline, never cancelled) on behalf of a caller's context
// with a deadline: with ContextTimeoutEnabled those calls cost no
// goroutine. A socket timeout at the context's deadline is reported as
// context.DeadlineExceeded.
//
// go-redis retries a command after some network errors (MaxRetries),
// invisibly to its caller, even when the command reached the server and
// only its reply was lost. dsync must see that failure: a release that ran
// and whose retry finds the hold gone is a success only to a caller that
// knows an earlier attempt may have run. The adapter therefore sends every
// call as a command that go-redis does not retry once written (see
// noRetry), and dsync retries it, knowing it may have run.
//
// Close releases the pub/sub connection and waits for the adapter's
// goroutines; the client stays the caller's to close.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// Option configures a Backend.
type Option func(*options)

type options struct {
	timeout     time.Duration
	solo        bool // pipelining off
	mux         backend.MuxOptions
	ackReplicas int
	ackTimeout  time.Duration
}

// WithTimeout bounds a script call whose context can never end, so that a
// server that stopped answering fails the call instead of blocking it.
// It takes effect when the client was made with ContextTimeoutEnabled;
// otherwise the client's ReadTimeout bounds such calls. The default is 10s.
// Its expiry is a transport error, which dsync retries, not one matching
// context.DeadlineExceeded: the caller's context did not end.
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
	return func(o *options) { o.mux.HealthCheck = d }
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
	return func(o *options) { o.mux.MaxBackoff = d }
}

// WithReplicaAck makes every call (scripts, SetNX and SetNXPublish) wait,
// after it ran, until n replicas acknowledged its writes (WAIT n timeout,
// sent in the same round trip on the same connection), as Redisson's
// sync-slaves check does. A call that fewer replicas acknowledged within
// timeout fails with an error matching ErrNotReplicated: its writes
// happened on the primary, but a failover now could lose them, so dsync
// treats the call as failed and retries it (acquisitions and releases are
// idempotent under retry).
//
// Replication stays asynchronous: an acknowledged write survives the
// failover of one primary to an acknowledging replica, no more. Fencing
// tokens remain what keeps a resource safe. The option applies to a
// *redis.Client (standalone or failover); on a cluster client it is
// ignored, since go-redis would send WAIT to any node.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) {
		if n > 0 && timeout > 0 {
			o.ackReplicas, o.ackTimeout = n, timeout
		}
	}
}

// ErrNotReplicated reports that a script call's writes were not
// acknowledged by as many replicas as WithReplicaAck requires.
var ErrNotReplicated = errors.New("goredis: writes not acknowledged by enough replicas")

// Backend is a backend.Backend over a go-redis client. It is safe for
// concurrent use.
type Backend struct {
	c          redis.UniversalClient
	opts       options
	sharded    bool
	ctxTimeout bool  // the client sets socket deadlines from contexts
	invalid    error // why c cannot be used, or nil

	closed atomic.Bool
	pipe   *backend.Pipeline
	mux    *backend.Mux
}

var (
	_ backend.Backend      = (*Backend)(nil)
	_ backend.Sharded      = (*Backend)(nil)
	_ backend.Batcher      = (*Backend)(nil)
	_ backend.Setter       = (*Backend)(nil)
	_ backend.SetPublisher = (*Backend)(nil)
)

// New returns a Backend that runs scripts through c. A nil client, or a
// *redis.Ring (whose shards do not share pub/sub), makes every call fail
// with an error matching dsync.ErrInvalidBackend.
func New(c redis.UniversalClient, opts ...Option) *Backend {
	b := &Backend{c: c, opts: options{timeout: 10 * time.Second}}
	for _, o := range opts {
		o(&b.opts)
	}
	switch c := c.(type) {
	case *redis.Client:
		b.ctxTimeout = c != nil && c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		b.sharded, b.opts.ackReplicas = c != nil, 0 // see WithReplicaAck
		b.ctxTimeout = c != nil && c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		b.invalid = fmt.Errorf("%w: goredis: a *redis.Ring is not supported: its shards neither share pub/sub nor route by hash slot", dsync.ErrInvalidBackend)
	}
	if v := reflect.ValueOf(c); c == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		b.invalid = fmt.Errorf("%w: goredis: nil client", dsync.ErrInvalidBackend)
	}
	b.pipe = backend.NewPipeline(backend.PipelineConfig{Check: b.check, Send: b.send, Batch: b.pipeline, Wrap: b.wrap,
		Honours: b.ctxTimeout, Timeout: b.opts.timeout, Off: b.opts.solo || b.opts.ackReplicas > 0})
	var d backend.PubSubDriver = dialer{b}
	if b.sharded {
		d = clusterDialer{dialer{b}}
	}
	b.mux = backend.NewMux(d, b.opts.mux)
	return b
}

// Sharded implements backend.Sharded: it reports true for a cluster
// client.
func (b *Backend) Sharded() bool { return b.sharded }

func (b *Backend) check(ctx context.Context) error {
	if b.invalid != nil {
		return b.invalid
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
// go out as one pipeline (a batch of the Pipeline), in one round trip; on
// a cluster the PUBLISH goes to its channel's slot's master (see newCmd),
// the SET's when the channel shares its key's hash tag, else a round trip
// to each node, in parallel. With WithReplicaAck, WAIT follows them in the
// pipeline, as it follows SetNX.
func (b *Backend) SetNXPublish(ctx context.Context, key, value string, ttl time.Duration, channel, message string) (bool, error) {
	return b.pipe.SetNXPublish(ctx, key, value, ttl, channel, message)
}

// send sends one call (backend.PipelineConfig).
func (b *Backend) send(ctx context.Context, c backend.Call) (any, error) {
	if b.opts.ackReplicas > 0 {
		// The call and WAIT in one pipeline (see pipeline).
		r, err := backend.PipelineBatch(ctx, []backend.Call{c}, b.pipeline)
		if err != nil {
			return nil, err
		}
		return r[0].Reply, r[0].Err
	}
	reply, err := b.do(ctx, c, false)
	if isNoScript(err) {
		reply, err = b.do(ctx, c, true)
	}
	if err != nil {
		return nil, err
	}
	return backend.NormalizeReply(reply, serverError)
}

// acked reads the reply of wait: an error matching ErrNotReplicated if
// fewer replicas than WithReplicaAck asks acknowledged the writes, or if
// the WAIT itself got an error reply. That reply must not pass for the
// script's: the script ran, and an error reply says to dsync that the
// server refused the call before it ran anything.
func (b *Backend) acked(wait *redis.Cmd) error {
	acked, err := wait.Int64()
	if isServerErr(err) {
		return fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, err)
	}
	if err != nil {
		return err
	}
	if acked < int64(b.opts.ackReplicas) {
		return fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, acked, b.opts.ackReplicas, b.opts.ackTimeout)
	}
	return nil
}

// noRetry is a command that go-redis does not send again once it was
// written (see redis.Cmder's NoRetry): a lost reply reaches dsync as an
// error, which tells it that the call may have run.
type noRetry struct{ *redis.Cmd }

func (noRetry) NoRetry() bool { return true }

// newCmd returns c as a command that go-redis does not retry once
// written, with EVAL when source is true. A plain command's key is its
// first argument (backend.Call.Key): a cluster client would otherwise take
// PUBLISH for a command without a key, and send it to any master rather
// than to its channel's slot's master, where the adapter subscribes the
// channel (see the package documentation) and where the SET it follows
// goes when the channel shares the key's hash tag.
func newCmd(ctx context.Context, c backend.Call, source bool) noRetry {
	cmd := redis.NewCmd(ctx, c.CommandLine(source)...)
	if c.Script == nil {
		cmd.SetFirstKeyPos(1)
	}
	return noRetry{cmd}
}

// do sends c as one command that go-redis does not retry once written.
func (b *Backend) do(ctx context.Context, c backend.Call, source bool) (any, error) {
	cmd := newCmd(ctx, c, source)
	b.c.Process(ctx, cmd)
	return cmd.Result()
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// wrap normalizes the error of a call: a nil reply is no error, an error
// reply is a *backend.ServerError, and a transport error that ctx caused
// matches ctx.Err().
func (b *Backend) wrap(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) {
		return &backend.ServerError{Message: re.Error()}
	}
	if errors.Is(err, ErrNotReplicated) {
		return err
	}
	if errors.Is(err, redis.ErrClosed) {
		// The backend, or the caller's client under it, is closed: no
		// retry can succeed.
		return fmt.Errorf("goredis: %w (%v)", backend.ErrClosed, err)
	}
	return backend.TransportError(ctx, "goredis", err)
}

// serverError recognizes an error reply inside an array (see
// backend.NormalizeReply).
func serverError(v any) (string, bool) {
	re, ok := v.(redis.Error)
	return fmt.Sprint(re), ok
}

// EvalBatch implements backend.Batcher: the calls go out in one pipeline,
// which a cluster client splits per node and sends to the nodes in
// parallel, one round trip each.
func (b *Backend) EvalBatch(ctx context.Context, calls []backend.Call) ([]backend.Result, error) {
	return b.pipe.EvalBatch(ctx, calls)
}

// pipeline sends calls in one pipeline (backend.PipelineConfig), followed
// by WAIT with WithReplicaAck (which turns sharing off: the batch is then
// one caller's call, a SetNXPublish, or an EvalBatch): a batch fewer
// replicas acknowledged fails as a whole, with an error matching
// ErrNotReplicated.
func (b *Backend) pipeline(ctx context.Context, calls []backend.Call, source bool) ([]backend.Result, error) {
	p := b.c.Pipeline()
	cmds := make([]noRetry, len(calls))
	for i, c := range calls {
		cmds[i] = newCmd(ctx, c, source)
		p.Process(ctx, cmds[i])
	}
	var wait *redis.Cmd
	if b.opts.ackReplicas > 0 {
		// On the calls' connection, which a *redis.Client sends a
		// pipeline on: WAIT counts the replicas that acknowledged its
		// writes.
		wait = p.Do(ctx, "WAIT", b.opts.ackReplicas, b.opts.ackTimeout.Milliseconds())
	}
	p.Exec(ctx) // errors are read from each command
	results := make([]backend.Result, len(calls))
	for i, cmd := range cmds {
		reply, err := cmd.Result()
		if err != nil && !isServerErr(err) {
			return nil, err // a transport error: no result is trusted
		}
		if err == nil {
			reply, err = backend.NormalizeReply(reply, serverError)
		}
		results[i] = backend.Result{Reply: reply, Err: b.wrap(ctx, err)}
	}
	if wait != nil {
		if err := b.acked(wait); err != nil {
			return nil, err
		}
	}
	return results, nil
}

func isServerErr(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
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
