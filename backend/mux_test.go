package backend_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// fakeServer is an in-memory pub/sub server for the Mux: a driver whose
// connections confirm every command at once and record them.
type fakeServer struct {
	mu       sync.Mutex
	conns    []*fakeConn
	routes   []string   // of each dial
	commands [][]string // every SUBSCRIBE and UNSUBSCRIBE, with its channels
}

type fakeConn struct {
	s    *fakeServer
	q    *backend.EventQueue
	lost chan error
	once sync.Once
}

func (s *fakeServer) DialPubSub(_ context.Context, route string) (backend.PubSubConn, error) {
	c := &fakeConn{s: s, q: backend.NewEventQueue(), lost: make(chan error, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, c)
	s.routes = append(s.routes, route)
	return c, nil
}

func (s *fakeServer) current() *fakeConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[len(s.conns)-1]
}

func (s *fakeServer) dials() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (c *fakeConn) command(kind backend.PubSubEventKind, name string, channels []string) error {
	c.s.mu.Lock()
	c.s.commands = append(c.s.commands, append([]string{name}, channels...))
	c.s.mu.Unlock()
	for _, ch := range channels {
		c.q.Push(backend.PubSubEvent{Kind: kind, Channel: ch})
	}
	return nil
}

func (c *fakeConn) Subscribe(_ context.Context, chs ...string) error {
	return c.command(backend.PubSubSubscribed, "SUBSCRIBE", chs)
}

func (c *fakeConn) Unsubscribe(_ context.Context, chs ...string) error {
	return c.command(backend.PubSubUnsubscribed, "UNSUBSCRIBE", chs)
}

func (c *fakeConn) Ping(context.Context) error {
	c.q.Push(backend.PubSubEvent{})
	return nil
}

func (c *fakeConn) Receive(ctx context.Context) (backend.PubSubEvent, error) {
	return c.q.Receive(ctx, c.lost)
}

func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.lost) })
	return nil
}

func (c *fakeConn) publish(channel, payload string) {
	c.q.Push(backend.PubSubEvent{Kind: backend.PubSubMessage, Channel: channel, Payload: payload})
}

// clusterServer adds the slot rule: channels starting with "a" on one
// master, the others on another.
type clusterServer struct{ *fakeServer }

func (s clusterServer) MasterAddr(_ context.Context, key string) (string, error) {
	if key[0] == 'a' {
		return "master-a", nil
	}
	return "master-b", nil
}

func receiveWithin(t *testing.T, sub backend.Subscription) backend.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := sub.Receive(ctx)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return m
}

func TestMuxSharesAChannel(t *testing.T) {
	ctx := context.Background()
	s := &fakeServer{}
	m := backend.NewMux(s, backend.MuxOptions{})
	defer m.Close()
	a, err := m.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	s.current().publish("ch", "x")
	for _, sub := range []backend.Subscription{a, b} {
		if m := receiveWithin(t, sub); m.Payload != "x" || m.Gap {
			t.Errorf("got %+v, want x", m)
		}
	}
	a.Close()
	b.Close()
	b.Close()
	if _, err := a.Receive(ctx); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Receive on a closed subscription: %v", err)
	}
	s.mu.Lock()
	got := fmt.Sprint(s.commands)
	s.mu.Unlock()
	if got != "[[SUBSCRIBE ch] [UNSUBSCRIBE ch]]" {
		t.Errorf("commands %s, want one SUBSCRIBE and one UNSUBSCRIBE", got)
	}
}

func TestMuxResubscribesInBatchesWithGaps(t *testing.T) {
	ctx := context.Background()
	s := &fakeServer{}
	m := backend.NewMux(s, backend.MuxOptions{MaxBackoff: time.Millisecond})
	const n = 1200
	subs := make([]backend.Subscription, n)
	for i := range subs {
		sub, err := m.Subscribe(ctx, fmt.Sprint("ch", i))
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = sub
	}
	s.mu.Lock()
	s.commands = nil
	s.mu.Unlock()
	s.current().Close() // the connection breaks
	for i, sub := range subs {
		if m := receiveWithin(t, sub); !m.Gap || m.Channel != fmt.Sprint("ch", i) {
			t.Fatalf("subscription %d after the break: %+v, want a gap", i, m)
		}
	}
	if d := s.dials(); d != 2 {
		t.Errorf("%d dials, want 2", d)
	}
	s.mu.Lock()
	batches, channels := len(s.commands), 0
	for _, c := range s.commands {
		if c[0] != "SUBSCRIBE" || len(c)-1 > 500 {
			t.Errorf("command %s with %d channels: want SUBSCRIBE of 500 at most", c[0], len(c)-1)
		}
		channels += len(c) - 1
	}
	s.mu.Unlock()
	if batches != 3 || channels != n {
		t.Errorf("%d channels in %d commands, want %d in 3", channels, batches, n)
	}
	// Messages flow again, and a slow subscription does not hold up the
	// others: subs[1] never reads while 1,000 messages pass.
	for i := range 1000 {
		s.current().publish("ch0", fmt.Sprint(i))
		s.current().publish("ch1", fmt.Sprint(i))
		if m := receiveWithin(t, subs[0]); m.Payload != fmt.Sprint(i) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	if m := receiveWithin(t, subs[1]); !m.Gap {
		t.Errorf("the slow subscription's first message: %+v, want a gap", m)
	}
	m.Close()
	if _, err := subs[0].Receive(ctx); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Receive after Close: %v", err)
	}
	if _, err := m.Subscribe(ctx, "late"); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}

func TestMuxPlacesChannelsOnTheirMaster(t *testing.T) {
	ctx := context.Background()
	s := clusterServer{&fakeServer{}}
	m := backend.NewMux(s, backend.MuxOptions{})
	defer m.Close()
	for _, ch := range []string{"a1", "b1", "a2", "b2"} {
		sub, err := m.Subscribe(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := fmt.Sprint(s.routes); got != "[a1 b1]" {
		t.Errorf("dials routed to %s, want one per master: [a1 b1]", got)
	}
	if got := fmt.Sprint(s.commands); got != "[[SUBSCRIBE a1] [SUBSCRIBE b1] [SUBSCRIBE a2] [SUBSCRIBE b2]]" {
		t.Errorf("commands %s", got)
	}
}

func TestMuxSubscribeHonoursContext(t *testing.T) {
	s := &fakeServer{}
	m := backend.NewMux(s, backend.MuxOptions{})
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Subscribe(ctx, "ch"); !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe with a cancelled ctx: %v", err)
	}
}
