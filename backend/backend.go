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
	// normalized reply. Arguments are strings, integers or []byte.
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
