package rueidis

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync/backend"
)

// dialer opens the Backend's pub/sub connections (see backend.Mux): each a
// dedicated connection from the client's pool, given back closed.
type dialer struct{ b *Backend }

func (d dialer) DialPubSub(ctx context.Context, _ string) (backend.PubSubConn, error) {
	return open(ctx, d.b.c)
}

func open(ctx context.Context, c rueidis.Client) (backend.PubSubConn, error) {
	dc, _ := c.Dedicate() // dc.Close gives the connection back
	// The first command establishes the connection.
	if err := dc.Do(ctx, dc.B().Ping().Build()).Error(); err != nil {
		dc.Close()
		return nil, err
	}
	cn := &conn{dc: dc, q: backend.NewEventQueue()}
	cn.lost = dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: cn.message, OnSubscription: cn.subscription})
	return cn, nil
}

// clusterDialer places each channel on the master serving its hash slot
// (see backend.SlotMaster), from the cluster's slot table, read anew when
// a slot is not in it and at every dial.
type clusterDialer struct {
	dialer
	table atomic.Pointer[backend.SlotTable]
}

func (d *clusterDialer) MasterAddr(ctx context.Context, key string) (string, error) {
	if t := d.table.Load(); t != nil {
		if addr, ok := t.Master(key); ok {
			return addr, nil
		}
	}
	return d.refresh(ctx, key)
}

func (d *clusterDialer) DialPubSub(ctx context.Context, route string) (backend.PubSubConn, error) {
	addr, err := d.refresh(ctx, route)
	if err != nil {
		return nil, err
	}
	node := d.b.c.Nodes()[addr]
	if node == nil {
		return nil, errors.New("rueidis: the client knows no node " + addr)
	}
	return open(ctx, node)
}

// refresh reads the slot table (CLUSTER SLOTS) and returns key's master.
func (d *clusterDialer) refresh(ctx context.Context, key string) (string, error) {
	// With the dial's context, as the connection's own calls below.
	reply, err := result(d.b.c.Do(ctx, d.b.c.B().ClusterSlots().Build()))
	if err != nil {
		return "", err
	}
	t, err := backend.NewSlotTable(reply)
	if err != nil {
		return "", err
	}
	d.table.Store(t)
	if addr, ok := t.Master(key); ok {
		return addr, nil
	}
	return "", errors.New("rueidis: no master serves the slot of " + key)
}

// conn is one dedicated pub/sub connection. rueidis hands its events to
// hooks, on the goroutine that reads the connection; they wait in an
// EventQueue for Receive.
type conn struct {
	dc   rueidis.DedicatedClient
	lost <-chan error // receives the error that ended the connection
	q    *backend.EventQueue
	once sync.Once
}

func (c *conn) message(m rueidis.PubSubMessage) {
	c.q.Push(backend.PubSubEvent{Kind: backend.PubSubMessage, Channel: m.Channel, Payload: m.Message})
}

func (c *conn) subscription(s rueidis.PubSubSubscription) {
	switch s.Kind {
	case "subscribe":
		c.q.Push(backend.PubSubEvent{Kind: backend.PubSubSubscribed, Channel: s.Channel})
	case "unsubscribe":
		c.q.Push(backend.PubSubEvent{Kind: backend.PubSubUnsubscribed, Channel: s.Channel})
	}
}

// Subscribe returns once the first confirmation arrived: rueidis waits
// for it.
func (c *conn) Subscribe(ctx context.Context, channels ...string) error {
	return c.dc.Do(ctx, c.dc.B().Subscribe().Channel(channels...).Build()).Error()
}

func (c *conn) Unsubscribe(ctx context.Context, channels ...string) error {
	return c.dc.Do(ctx, c.dc.B().Unsubscribe().Channel(channels...).Build()).Error()
}

// Ping waits for the reply, which rueidis keeps to itself: the event that
// shows the connection alive is queued here.
func (c *conn) Ping(ctx context.Context) error {
	err := c.dc.Do(ctx, c.dc.B().Ping().Build()).Error()
	if err == nil {
		c.q.Push(backend.PubSubEvent{})
	}
	return err
}

func (c *conn) Receive(ctx context.Context) (backend.PubSubEvent, error) {
	return c.q.Receive(ctx, c.lost)
}

func (c *conn) Close() error {
	c.once.Do(c.dc.Close)
	return nil
}
