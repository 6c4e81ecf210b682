package redigo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
)

// dialer opens the Backend's pub/sub connections (see backend.Mux) with
// the pool's Dial or DialContext function; they never enter the pool.
type dialer struct{ pool *redis.Pool }

func (d dialer) DialPubSub(ctx context.Context, _ string) (backend.PubSubConn, error) {
	var (
		c   redis.Conn
		err error
	)
	switch {
	case d.pool.DialContext != nil:
		c, err = d.pool.DialContext(ctx)
	case d.pool.Dial != nil:
		c, err = d.pool.Dial()
	default:
		err = errors.New("redigo: the pool has neither Dial nor DialContext")
	}
	if err != nil {
		return nil, err
	}
	return conn{c}, nil
}

// conn is a pub/sub connection. It parses replies itself rather than
// through redigo's PubSubConn, which takes the +PONG that a PING gets on a
// connection with no subscription left for an error: every idle health
// check would then cost a reconnection.
type conn struct{ c redis.Conn }

func (c conn) Subscribe(_ context.Context, channels ...string) error {
	return c.send("SUBSCRIBE", channels)
}

func (c conn) Unsubscribe(_ context.Context, channels ...string) error {
	return c.send("UNSUBSCRIBE", channels)
}

func (c conn) Ping(context.Context) error { return c.send("PING", nil) }

func (c conn) send(cmd string, channels []string) error {
	args := make([]any, len(channels))
	for i, ch := range channels {
		args[i] = ch
	}
	if err := c.c.Send(cmd, args...); err != nil {
		return err
	}
	return c.c.Flush()
}

func (c conn) Close() error { return c.c.Close() }

// Receive reads one reply, within ctx's deadline (a read timeout: redigo
// closes the connection when it passes).
func (c conn) Receive(ctx context.Context) (backend.PubSubEvent, error) {
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	reply, err := redis.ReceiveWithTimeout(c.c, timeout)
	if err != nil {
		return backend.PubSubEvent{}, err
	}
	switch r := reply.(type) {
	case string: // +PONG, outside subscribed mode
		return backend.PubSubEvent{}, nil
	case redis.Error:
		return backend.PubSubEvent{}, r
	case []any:
		var kind string
		if len(r) > 0 {
			kind, _ = redis.String(r[0], nil)
		}
		switch {
		case kind == "pong":
			return backend.PubSubEvent{}, nil
		case len(r) != 3:
		case kind == "message":
			ch, _ := redis.String(r[1], nil)
			data, _ := redis.String(r[2], nil)
			return backend.PubSubEvent{Kind: backend.PubSubMessage, Channel: ch, Payload: data}, nil
		case kind == "subscribe" || kind == "unsubscribe":
			ch, _ := redis.String(r[1], nil)
			ev := backend.PubSubEvent{Kind: backend.PubSubSubscribed, Channel: ch}
			if kind == "unsubscribe" {
				ev.Kind = backend.PubSubUnsubscribed
			}
			return ev, nil
		}
	}
	return backend.PubSubEvent{}, fmt.Errorf("redigo: unexpected reply on the pub/sub connection: %v", reply)
}
