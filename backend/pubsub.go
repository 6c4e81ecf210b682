package backend

import (
	"context"
)

// PubSubDriver opens the pub/sub connections of a Mux: it is the part of
// an adapter that knows its client library. The Mux does the rest:
// multiplexing, confirmations, health checks, reconnection and gaps.
type PubSubDriver interface {
	// DialPubSub opens a connection for pub/sub and returns once it is
	// established (a client that dials lazily should send a PING and let
	// Receive read the reply). The Mux bounds ctx by a few seconds. A
	// connection dialed outside the client's pool gets the client's
	// settings (AUTH, SELECT, TLS), from the client or from an option of
	// the adapter.
	//
	// The connection goes to the server the client currently sends
	// writes to (behind Sentinel, the primary it knows now), or, if the
	// driver implements SlotMaster, to the master serving route's hash
	// slot (route is one of the channels it will carry; "" otherwise),
	// found anew at each call, since a failover or resharding moves it.
	DialPubSub(ctx context.Context, route string) (PubSubConn, error)
}

// SlotMaster is implemented by a PubSubDriver over Redis Cluster. A Mux
// whose driver implements it keeps one connection per master and
// subscribes each channel on the master serving the channel's hash slot.
//
// The reason is speed, not correctness: PUBLISH reaches every node of a
// cluster, but a message published on one node reaches a subscriber on
// another only through the cluster bus, which on Redis 7 delivers it some
// 40ms late, and later under load. dsync publishes wake-ups from the
// scripts that release a lock, and a channel shares its lock's hash tag,
// so a channel subscribed on its slot's master hears the release at once.
type SlotMaster interface {
	// MasterAddr returns the address (host:port) of the master serving
	// key's hash slot, as the client currently knows it. Two keys served
	// by one master must give the same string.
	MasterAddr(ctx context.Context, key string) (string, error)
}

// PubSubConn is one pub/sub connection, driven by a Mux. The Mux calls
// Subscribe, Unsubscribe and Ping from one goroutine at a time (never
// concurrently with each other), and Receive from another, concurrently
// with them; Close may be called from any goroutine, more than once.
type PubSubConn interface {
	// Subscribe sends SUBSCRIBE for channels (one or many). It need not
	// wait for the server's confirmations: Receive returns them, one
	// PubSubSubscribed event per channel, in the order sent.
	Subscribe(ctx context.Context, channels ...string) error

	// Unsubscribe sends UNSUBSCRIBE for channels; Receive returns one
	// PubSubUnsubscribed event per channel.
	Unsubscribe(ctx context.Context, channels ...string) error

	// Ping sends PING. Its reply, whatever its shape, is an event that
	// Receive returns (a PubSubOther event): the Mux only needs to see
	// that the connection is alive. A connection with no subscription
	// left answers PING as a plain command; that reply is not an error.
	Ping(ctx context.Context) error

	// Receive returns the next event read from the connection. It
	// returns an error when the connection failed, when ctx's deadline
	// passed, or when Close was called; the Mux then closes the
	// connection and dials another. A driver may honour ctx's deadline
	// only (as a read timeout): the Mux interrupts a Receive by Close.
	Receive(ctx context.Context) (PubSubEvent, error)

	// Close closes the connection. It releases what the driver created
	// for it and nothing else (never the caller's client).
	Close() error
}

// PubSubEventKind says what a PubSubEvent is.
type PubSubEventKind int

const (
	// PubSubOther is anything the Mux does not act on, such as a PING
	// reply: it only shows that the connection is alive.
	PubSubOther PubSubEventKind = iota
	// PubSubMessage is a message published to Channel.
	PubSubMessage
	// PubSubSubscribed is the server's confirmation of one SUBSCRIBE of
	// Channel.
	PubSubSubscribed
	// PubSubUnsubscribed is the server's confirmation of one
	// UNSUBSCRIBE of Channel.
	PubSubUnsubscribed
)

// PubSubEvent is what a PubSubConn read from its connection.
type PubSubEvent struct {
	Kind    PubSubEventKind
	Channel string
	Payload string // of a PubSubMessage
}
