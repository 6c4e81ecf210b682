package goredis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
)

// dialer opens the Backend's pub/sub connections (see backend.Mux), each
// a *redis.PubSub of its own.
//
// A *redis.PubSub reconnects by itself after some errors and re-subscribes
// what it remembers, without telling its reader which confirmations belong
// to which connection. The Mux therefore treats each as one connection: on
// any error it is closed and replaced.
type dialer struct{ b *Backend }

func (d dialer) DialPubSub(ctx context.Context, _ string) (backend.PubSubConn, error) {
	return d.open(ctx, d.b.c)
}

// open returns a *redis.PubSub whose connection is established: go-redis
// dials lazily, so a PING makes it dial now. Its reply is read, and
// ignored, by the reader.
func (d dialer) open(ctx context.Context, c interface {
	Subscribe(context.Context, ...string) *redis.PubSub
}) (backend.PubSubConn, error) {
	ps := c.Subscribe(ctx)
	if err := ps.Ping(ctx); err != nil {
		ps.Close()
		return nil, err
	}
	return conn{ps}, nil
}

// clusterDialer places each channel on the master serving its hash slot
// (see backend.SlotMaster), with go-redis's view of the cluster.
type clusterDialer struct{ dialer }

func (d clusterDialer) MasterAddr(ctx context.Context, key string) (string, error) {
	m, err := d.b.c.(*redis.ClusterClient).MasterForKey(ctx, key)
	if err != nil {
		return "", d.b.wrap(ctx, err)
	}
	return m.Options().Addr, nil
}

func (d clusterDialer) DialPubSub(ctx context.Context, route string) (backend.PubSubConn, error) {
	m, err := d.b.c.(*redis.ClusterClient).MasterForKey(ctx, route)
	if err != nil {
		return nil, err
	}
	return d.open(ctx, m)
}

type conn struct{ ps *redis.PubSub }

func (c conn) Subscribe(ctx context.Context, channels ...string) error {
	return c.ps.Subscribe(ctx, channels...)
}

func (c conn) Unsubscribe(ctx context.Context, channels ...string) error {
	return c.ps.Unsubscribe(ctx, channels...)
}

func (c conn) Ping(ctx context.Context) error { return c.ps.Ping(ctx) }

func (c conn) Close() error { return c.ps.Close() }

func (c conn) Receive(ctx context.Context) (backend.PubSubEvent, error) {
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	msg, err := c.ps.ReceiveTimeout(ctx, timeout)
	if err != nil {
		return backend.PubSubEvent{}, err
	}
	switch m := msg.(type) {
	case *redis.Message:
		return backend.PubSubEvent{Kind: backend.PubSubMessage, Channel: m.Channel, Payload: m.Payload}, nil
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe":
			return backend.PubSubEvent{Kind: backend.PubSubSubscribed, Channel: m.Channel}, nil
		case "unsubscribe":
			return backend.PubSubEvent{Kind: backend.PubSubUnsubscribed, Channel: m.Channel}, nil
		}
	}
	return backend.PubSubEvent{}, nil
}
