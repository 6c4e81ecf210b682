package backend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
)

// The helpers below are for adapters: the translations every client
// library needs, written once.

// NormalizeReply converts a reply as a client library decoded it into the
// shapes of rule 2: nil stays nil, integers become int64, strings and
// []byte become string, arrays ([]any) are normalized element by element,
// in place: the reply is the adapter's to rewrite, as one a client decoded
// for this call is, and the array comes back as the same slice.
// A nil []byte is nil: a client that decodes bulk strings as []byte gives
// a nil bulk string (and a script's false, over RESP2) as a nil slice and
// the empty string as an empty one (redigo, radix). A client that gives
// the empty string as a nil slice must pass []byte{} for it.
// Over RESP3 a script's true arrives as a boolean and its numbers may
// arrive as doubles: true becomes int64(1), false nil, a float64 is
// truncated to int64, and a map (map[string]any) becomes an array of keys
// and values, the shapes RESP2 gives and dsync's scripts assume.
//
// serverError recognizes the client's value for an error reply inside an
// array, where clients leave it as an element instead of returning it as
// the call's error, and returns its text (see ServerError), which becomes
// a *ServerError. That value is redigo's redis.Error, a go-redis
// redis.Error, a *rueidis.RedisError, radix v4's error. For another client,
// run the suite: until serverError recognizes the value, its
// ReplyNormalization case fails with "reply of type T", naming it. Any
// other type is an error matching dsync.ErrUnexpectedReply.
func NormalizeReply(v any, serverError func(v any) (string, bool)) (any, error) {
	reply := v
	switch v := v.(type) {
	case nil, int64, string:
		return v, nil
	case []byte:
		if v == nil {
			return nil, nil
		}
		return string(v), nil
	case bool:
		if v {
			return int64(1), nil
		}
		return nil, nil
	case float64:
		if v >= math.MinInt64 && v <= math.MaxInt64 {
			return int64(v), nil
		}
	case *ServerError:
		return v, nil
	case []any:
		// In place, and the reply as it came: a new array and its boxing
		// would cost a script's reply two allocations.
		for i, e := range v {
			n, err := NormalizeReply(e, serverError)
			if err != nil {
				return nil, err
			}
			v[i] = n
		}
		return reply, nil
	case map[string]any:
		// RESP3 maps (in CLUSTER SLOTS, say) as RESP2 sends them: key,
		// value, ..., here in key order. No dsync script returns one.
		flat := make([]any, 0, 2*len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			flat = append(flat, k, v[k])
		}
		return NormalizeReply(flat, serverError)
	}
	if msg, ok := serverError(v); ok {
		return &ServerError{Message: msg}, nil
	}
	return nil, fmt.Errorf("%w: reply of type %T", dsync.ErrUnexpectedReply, v)
}

// TransportError wraps err, the failure of a round trip, with prefix (the
// adapter's name and the operation), so that it matches ctx.Err() when
// the context is what ended the call: clients turn a deadline into a
// socket deadline, whose i/o timeout can fire just before the context's
// own timer. The result wraps err too; an err whose text already starts
// with prefix, as a client's own errors may, is not prefixed again. A nil
// err gives nil.
//
// ctx is the context the call was given, not one the adapter derived from
// it. A context error in err that ctx did not cause (ctx is not done, nor
// past its deadline), such as the expiry of the adapter's own timeout
// (see CallTimeout), is reported in the text only: the result then
// matches no context error, and dsync retries it as a transport error
// (rule 10).
func TransportError(ctx context.Context, prefix string, err error) error {
	if err == nil {
		return nil
	}
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded
	}
	switch {
	case cerr != nil && !errors.Is(err, cerr):
		return fmt.Errorf("%s: %w (%w)", prefix, cerr, err)
	case cerr == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		return fmt.Errorf("%s: %v, the call's context not ended", prefix, err)
	case strings.HasPrefix(err.Error(), prefix+": "):
		return err // the client named itself, as redigo does
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// CallTimeout returns the bound of a call whose context can never be
// cancelled (rule 7): d, the adapter's own timeout, or less if ctx has a
// deadline, which such a context may have; never less than a millisecond.
//
// d bounds a call that nothing else bounds, such as one of Lock with
// context.Background, on a server that stopped answering or a pool with
// no free connection. The shipped adapters take it as an option, 10s by
// default: far above any call on a healthy server, short enough for a
// hung connection to be given up and the call retried. A call that d
// ends, rather than ctx, fails with a transport error, not one matching
// context.DeadlineExceeded (rule 10; TransportError, given ctx, sees to
// it).
//
// To bound a call with a client that gives up only when Done closes, use
// context.WithTimeout(context.WithoutCancel(ctx), CallTimeout(ctx, d)),
// never context.WithTimeout(ctx, ...): when ctx's deadline is the
// earlier, that returns a child with no timer, whose Done never closes,
// and the call waits for its reply.
func CallTimeout(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl), time.Millisecond))
	}
	return d
}

// CallContext returns the context with which a call with ctx runs on the
// caller's goroutine, and false if it must wait for its reply on a
// goroutine of its own (Calls.Do): ctx can never be cancelled, and either
// the client sets socket deadlines from contexts (honours is true; the
// call gets ctx's deadline, or timeout if it has none), or ctx has no
// deadline (the client's own read timeout bounds the call). dsync's
// primitives call with contexts that have a deadline and can never be
// cancelled on behalf of callers whose contexts have a deadline, so that a
// client that honours deadlines spends no goroutine on them.
//
// On false, a ctx that can never be cancelled still has a deadline to
// keep: give Calls.Do a context that ends then, such as
// context.WithDeadline(context.WithoutCancel(ctx), deadline).
func CallContext(ctx context.Context, honours bool, timeout time.Duration) (context.Context, bool) {
	if ctx.Done() != nil {
		return nil, false
	}
	_, deadline := ctx.Deadline()
	switch {
	case deadline == honours:
		return ctx, true
	case honours:
		return DeadlineContext(ctx, time.Now().Add(CallTimeout(ctx, timeout))), true
	}
	return nil, false
}

// DeadlineContext returns a context that can never be cancelled, with
// ctx's values and the given deadline: the bound of a call whose context
// has none, for a client that sets socket deadlines from contexts, without
// the timer and goroutine of a cancellable context.
func DeadlineContext(ctx context.Context, deadline time.Time) context.Context {
	return &deadlineContext{ctx, deadline}
}

type deadlineContext struct {
	context.Context // for its values
	deadline        time.Time
}

func (c *deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineContext) Done() <-chan struct{}       { return nil }
func (c *deadlineContext) Err() error                  { return nil }

// Calls runs the calls of an adapter whose client cannot give up a call
// in flight when its context is cancelled (go-redis, and rueidis without
// auto-pipelining, honour deadlines only), or gives it up only when its
// reader reaches the call (radix v4 watches ctx.Done(), but its reader
// first reads the replies of the calls before): a call whose context can
// be cancelled waits for its reply on a goroutine of its own, and returns
// as soon as the context ends, with an error matching ctx.Err(). The
// abandoned call finishes in the background, where the client reads its
// whole reply, so the connection goes back to the pool in a known state.
// Close waits for abandoned calls: the adapter's Close calls it, so that
// no goroutine of the adapter outlives it.
//
// The suite's Backend/ContextCancelled case tells whether a client needs
// Calls: without it, such a client fails it with "returned after ...,
// when its reply came".
//
// The zero value is ready to use. A Calls must not be copied.
type Calls struct {
	mu       sync.Mutex // orders each Add before Close's Wait
	closed   bool
	inflight sync.WaitGroup
}

// Do runs fn with ctx. A context that can never be cancelled (Done
// returns nil) runs fn on the caller's goroutine, at no extra cost, and
// its deadline, if any, is fn's to keep (see CallContext).
// After Close, Do returns ErrClosed.
func (c *Calls) Do(ctx context.Context, fn func(ctx context.Context) (any, error)) (any, error) {
	if ctx.Done() == nil {
		return fn(ctx)
	}
	type result struct {
		reply any
		err   error
	}
	done := make(chan result, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.inflight.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.inflight.Done()
		reply, err := fn(ctx)
		done <- result{reply, err}
	}()
	select {
	case r := <-done:
		return r.reply, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close makes later calls of Do fail with ErrClosed and waits for the
// calls in flight, abandoned ones included. It is idempotent.
func (c *Calls) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.inflight.Wait()
}

// ArgStrings converts Eval's arguments to strings, for a client that
// sends nothing else. dsync passes arguments of four types only: string,
// []byte, int and int64 (integers in decimal); any other is an error.
func ArgStrings(args []any) ([]string, error) {
	return AppendArgStrings(make([]string, 0, len(args)), args)
}

// AppendArgStrings is ArgStrings appending to dst, for a client that
// copies the strings it is given: a caller may then pass a buffer of its
// own, on its stack, and allocate nothing.
func AppendArgStrings(dst []string, args []any) ([]string, error) {
	for _, a := range args {
		switch a := a.(type) {
		case string:
			dst = append(dst, a)
		case []byte:
			dst = append(dst, string(a))
		case int:
			dst = append(dst, strconv.Itoa(a))
		case int64:
			dst = append(dst, strconv.FormatInt(a, 10))
		default:
			return nil, fmt.Errorf("backend: script argument of type %T, want string, []byte, int or int64", a)
		}
	}
	return dst, nil
}
