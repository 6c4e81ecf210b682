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
// A script call whose context can be cancelled runs through redigo's
// DoContext, which reads the reply on a goroutine of its own: the only way
// redigo offers to give up on a connection mid-call, and a measurable cost
// per call. A call whose context can never end (context.Background, as
// Lock and Unlock use) needs no goroutine: the adapter bounds it with a
// read deadline of its own (see WithTimeout).
//
// Close releases the pub/sub connection and its goroutine; the pool stays
// the caller's to close.
package redigo

import (
	"context"
	"errors"
	"fmt"
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
// connection. The first attempt is immediate; the default cap is 500ms.
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
	mux    *backend.Mux
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend that runs scripts on connections from pool. A nil
// pool makes every call fail with an error matching dsync.ErrInvalidBackend.
func New(pool *redis.Pool, opts ...Option) *Backend {
	b := &Backend{pool: pool, opts: options{timeout: 10 * time.Second}}
	for _, o := range opts {
		o(&b.opts)
	}
	b.mux = backend.NewMux(dialer{pool}, b.opts.mux)
	return b
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
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	conn, err := b.get(ctx)
	if err != nil {
		return nil, backend.TransportError(ctx, "redigo: get connection", err)
	}
	defer conn.Close()

	cmd := make([]any, 0, 2+len(keys)+len(args))
	cmd = append(cmd, s.HashArg(), len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)

	reply, err := b.do(ctx, conn, "EVALSHA", cmd)
	if backend.IsNoScript(err) {
		cmd[0] = s.Source()
		reply, err = b.do(ctx, conn, "EVAL", cmd)
	}
	return reply, err
}

// get takes a connection from the pool. A context that can never end gets
// the adapter's timeout here too: a pool that waits for a free connection,
// or dials a new one, would otherwise wait without bound. A pool that does
// not wait uses the context only to dial, which a deadline bounds without
// the timer and goroutine of a cancellable context.
func (b *Backend) get(ctx context.Context) (redis.Conn, error) {
	if ctx.Done() != nil {
		return b.pool.GetContext(ctx)
	}
	if !b.pool.Wait {
		// Such a pool uses the context only to dial: a deadline serves.
		return b.pool.GetContext(backend.DeadlineContext(ctx, time.Now().Add(backend.CallTimeout(ctx, b.opts.timeout))))
	}
	gctx, cancel := context.WithTimeout(context.Background(), backend.CallTimeout(ctx, b.opts.timeout))
	defer cancel()
	return b.pool.GetContext(gctx)
}

// do sends one command and normalizes its reply and error.
func (b *Backend) do(ctx context.Context, conn redis.Conn, name string, args []any) (any, error) {
	var (
		reply any
		err   error
	)
	if ctx.Done() == nil {
		// DoContext costs a goroutine per call; a context that can never
		// be cancelled needs only a read deadline.
		reply, err = redis.DoWithTimeout(conn, backend.CallTimeout(ctx, b.opts.timeout), name, args...)
	} else {
		reply, err = redis.DoContext(conn, ctx, name, args...)
	}
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			return nil, &backend.ServerError{Message: string(re)}
		}
		return nil, backend.TransportError(ctx, "redigo: "+name, err)
	}
	return backend.NormalizeReply(reply, serverError)
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

// Close closes the pub/sub connection, ends every subscription and waits for
// the adapter's goroutine to exit. It does not close the pool. Close is
// idempotent; afterwards every call returns an error matching
// backend.ErrClosed.
func (b *Backend) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.mux.Close()
	}
	return nil
}
