package backend

import (
	"context"
	"fmt"
	"time"

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
	// and int64; dsync passes no other. Eval may go on reading ctx, keys
	// and args after it returned an error (a pipelining client may still
	// be writing a call whose caller has left): dsync never changes them
	// once it has made a call.
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

// Call is one call of a batch: a script call, or a plain command.
type Call struct {
	Script *Script
	Keys   []string
	Args   []any

	// Command, when Script is nil, is a plain command to send instead,
	// as Command, Keys..., Args... (SET key value NX PX ms, for
	// Setter.SetNX, and PUBLISH channel message, for
	// SetPublisher.SetNXPublish): an adapter's Pipeline sends such calls. EvalBatch is
	// never given one. Line, if set, is that whole command line, made by
	// the caller, which CommandLine returns as it is.
	Command string
	Line    []any

	// boxes, when set (by a Pipeline), boxes the keys for CommandLine.
	boxes *boxes
}

// Key returns the key that routes the call to its hash slot: its first
// key, or a plain command's, the argument after the command's name (SET
// key value ..., or PUBLISH channel ..., which any node of a cluster
// would take, but whose slot's master is where the shipped adapters
// subscribe the channel); "" if it has none.
func (c Call) Key() string {
	if len(c.Keys) > 0 {
		return c.Keys[0]
	}
	if c.Script == nil && len(c.Line) > 1 {
		k, _ := c.Line[1].(string)
		return k
	}
	return ""
}

// CommandLine returns the call as the arguments of one command, its name
// first: EVALSHA sha numkeys keys... args..., or EVAL with the script's
// source when source is true, or a plain command's Command keys... args....
// Script hashes and sources are interface values made once (see
// Script.HashArg), and so are the keys of a call made through a Pipeline,
// which keeps them boxed for the next calls with the same keys.
func (c Call) CommandLine(source bool) []any {
	if c.Script == nil && c.Line != nil {
		return c.Line
	}
	line := make([]any, 0, 3+len(c.Keys)+len(c.Args))
	switch {
	case c.Script == nil:
		line = append(line, c.Command)
	case source:
		line = append(line, "EVAL", c.Script.Source(), len(c.Keys))
	default:
		line = append(line, "EVALSHA", c.Script.HashArg(), len(c.Keys))
	}
	for _, k := range c.Keys {
		if c.boxes != nil {
			line = append(line, c.boxes.box(k))
		} else {
			line = append(line, k)
		}
	}
	return append(line, c.Args...)
}

// A Setter sets a key that does not exist yet, with an expiry, in one
// plain command, where a script would cost the server more: it is an
// optional extension of Backend, which dsync uses where it has one and
// replaces with a script where it has not. The shipped adapters implement
// it, through the same path as their Eval (their Pipeline, or the
// client's own pipelining).
type Setter interface {
	// SetNX sets key to value, to expire after ttl, if key does not
	// exist (SET key value NX PX ms), and reports whether it did. ttl is
	// rounded up to a whole millisecond (see PX); zero or less is an
	// error matching dsync.ErrInvalidLease, before any I/O. Its errors are
	// Eval's: ctx bounds it (rule 7), a closed backend fails it with
	// ErrClosed, and a transport error may hide a success. So may false:
	// it means the key exists, whoever set it, and a SetNX retried after
	// an unseen success (by dsync, or by a client that retries, as
	// go-redis does) finds the key its first attempt set. A caller that
	// retries reads the value before it concludes.
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
}

// A SetPublisher is a Setter that also sends, in the same round trip, a
// message for those who watch the key: an optional extension of Backend,
// which dsync uses where it has one to announce, at no extra round trip,
// a key it may have set (an election's campaign hints its observers). The
// shipped adapters implement it through their Pipeline
// (Pipeline.SetNXPublish).
type SetPublisher interface {
	Setter

	// SetNXPublish is SetNX followed, in the same round trip, by PUBLISH
	// channel message: the two commands are written together, adjacent
	// and in that order, and both replies are read, as for a batch of two
	// calls. The PUBLISH is sent whether or not the SET took the key, and
	// it is not sent at all when the SET is not (ttl of zero or less, a
	// context that ended before the call went out, a closed backend).
	//
	// It reports the SET's outcome and errors as SetNX does: ttl is
	// rounded up to a whole millisecond (see PX), zero or less is an
	// error matching dsync.ErrInvalidLease before any I/O, ctx bounds the
	// call (rule 7), a closed backend fails it with ErrClosed, and a
	// transport error, for the pair as a whole, may hide a success of the
	// SET, and a sent PUBLISH. The PUBLISH's own failure (an error reply,
	// such as NOPERM for a channel an ACL denies the client's user, or a
	// reply that cannot be read as one) is the error when the SET has
	// none, wrapping the *ServerError (or the error matching
	// dsync.ErrUnexpectedReply), with the SET's known outcome reported
	// all the same: pub/sub loses a message only where its receivers get
	// a gap instead (see Message), so a message refused would leave them
	// unaware of the SET for good, and the caller, told, can undo the SET
	// it knows it made. The number of receivers is not reported.
	SetNXPublish(ctx context.Context, key, value string, ttl time.Duration, channel, message string) (bool, error)
}

// PX returns ttl as the milliseconds of SET's PX, rounded up so that a
// key never expires before ttl has passed; a ttl of zero or less is an
// error matching dsync.ErrInvalidLease, for a Setter to return before any
// I/O.
func PX(ttl time.Duration) (int64, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("%w: SetNX with a ttl of %v", dsync.ErrInvalidLease, ttl)
	}
	return int64((ttl + time.Millisecond - 1) / time.Millisecond), nil
}

// Result is the normalized reply of one call of a batch, or its error.
type Result struct {
	Reply any
	Err   error
}

// SetReply reads the normalized reply of SET ... NX, for a Setter: "OK"
// is true, nil (the key existed) false; an error is passed on, and any
// other reply is an error matching dsync.ErrUnexpectedReply.
func SetReply(reply any, err error) (bool, error) {
	switch {
	case err != nil:
		return false, err
	case reply == "OK":
		return true, nil
	case reply == nil:
		return false, nil
	}
	return false, fmt.Errorf("%w: SET NX replied %T %v", dsync.ErrUnexpectedReply, reply, reply)
}
