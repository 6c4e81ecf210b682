package backend

import (
	"context"

	"github.com/dsyncgo/dsync"
)

// ErrClosed is dsync.ErrClosed, repeated here for adapter writers.
var ErrClosed = dsync.ErrClosed

// Backend runs Lua scripts atomically on one Redis-compatible server or
// cluster and delivers pub/sub messages. Implementations must be safe for
// concurrent use. See the package documentation for the rules.
type Backend interface {
	// Eval runs s with the given keys and arguments and returns its
	// normalized reply. Arguments are of four types: string, []byte, int
	// and int64; dsync passes no other.
	Eval(ctx context.Context, s *Script, keys []string, args ...any) (any, error)

	// Subscribe subscribes to channel and returns once the server has
	// confirmed the subscription.
	Subscribe(ctx context.Context, channel string) (Subscription, error)

	// Close releases the resources the backend created. It is idempotent.
	Close() error
}

// Subscription receives the messages published to one channel.
type Subscription interface {
	// Receive returns the next message, waiting until one arrives, ctx is
	// done, or the subscription or its backend is closed (ErrClosed).
	Receive(ctx context.Context) (Message, error)

	// Close ends the subscription. It is idempotent.
	Close() error
}

// Message is a pub/sub message, or a gap.
type Message struct {
	Channel string
	Payload string

	// Gap reports that messages may have been missed before this one: the
	// connection was re-established, or the receiver fell behind. A gap
	// has no payload. Receivers should re-read whatever state the missed
	// messages would have announced.
	Gap bool
}

// Sharded is implemented by backends whose server spreads keys over Redis
// Cluster hash slots. When Sharded reports true, dsync never sends one
// script call keys from different slots. A backend that does not implement
// Sharded is treated as a single shard.
type Sharded interface {
	Sharded() bool
}

// IsSharded reports whether b declares itself sharded.
func IsSharded(b Backend) bool {
	s, ok := b.(Sharded)
	return ok && s.Sharded()
}

// Batcher is an optional extension of Backend: it sends many script calls
// at once, in one pipeline per server node, where Eval would cost a round
// trip each. dsync uses it where a sharded backend would otherwise make one
// call per hash slot: lease renewals, up to 1000 calls of one slot each per
// batch. It never calls EvalBatch on a backend that does not report
// Sharded, whose renewals already go as one Eval per script for up to 500
// holds.
type Batcher interface {
	// EvalBatch runs every call and returns one result per call, in
	// order. Each call is atomic on its own; the batch as a whole is not.
	// The keys of each call share one hash slot. An error for the whole
	// batch (a transport error, ctx done) means no result can be trusted:
	// some calls may have run. A call's own failure, such as an error
	// reply, is in its Result.
	EvalBatch(ctx context.Context, calls []Call) ([]Result, error)
}

// Call is one script call of a batch.
type Call struct {
	Script *Script
	Keys   []string
	Args   []any
}

// Result is the normalized reply of one call of a batch, or its error.
type Result struct {
	Reply any
	Err   error
}
