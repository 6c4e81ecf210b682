package backend_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// timedServer records when each dial came.
type timedServer struct {
	*fakeServer
	mu    sync.Mutex
	times []time.Time
}

func (s *timedServer) DialPubSub(ctx context.Context, route string) (backend.PubSubConn, error) {
	s.mu.Lock()
	s.times = append(s.times, time.Now())
	s.mu.Unlock()
	return s.fakeServer.DialPubSub(ctx, route)
}

// dialedAt returns when the n-th dial came (from 1).
func (s *timedServer) dialedAt(t *testing.T, n int) time.Time {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.times) < n {
		t.Fatalf("%d dials; want %d", len(s.times), n)
	}
	return s.times[n-1]
}

// A connection that served is dialled again at once when it is lost, as
// after a server's restart; one lost soon after its dial waits the first
// backoff (10-20ms), as before, so that a server that drops every
// connection it accepts is not dialled in a loop, and no more, so that
// pub/sub comes back as soon after each of many quick losses.
func TestMuxRedialsALostConnectionAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &timedServer{fakeServer: &fakeServer{}}
		m := backend.NewMux(s, backend.MuxOptions{HealthCheck: time.Hour})
		defer m.Close()
		sub, err := m.Subscribe(context.Background(), "ch")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()

		// redial loses the current connection and returns how long after
		// the loss the next dial, the n-th, came.
		redial := func(n int) time.Duration {
			t.Helper()
			lost := time.Now()
			s.current().Close()
			if msg := receiveWithin(t, sub); !msg.Gap {
				t.Fatalf("after loss %d: %+v; want a gap", n-1, msg)
			}
			return s.dialedAt(t, n).Sub(lost)
		}
		time.Sleep(2 * time.Second) // the connection serves
		if d := redial(2); d != 0 {
			t.Errorf("a connection that served 2s was dialled again %v after its loss; want at once", d)
		}
		// Lost right after their dial, twice: the first backoff each time.
		for n := 3; n <= 4; n++ {
			if d := redial(n); d < 10*time.Millisecond || d > 20*time.Millisecond {
				t.Errorf("dial %d, after a connection lost at once: %v after the loss; want the first backoff, 10-20ms", n, d)
			}
		}
	})
}

// droppingServer accepts every dial and drops the connection before it
// answers anything, as a server that closes what it accepts does.
type droppingServer struct {
	mu    sync.Mutex
	times []time.Time
}

type droppedConn struct{}

func (s *droppingServer) DialPubSub(context.Context, string) (backend.PubSubConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times = append(s.times, time.Now())
	return droppedConn{}, nil
}

func (droppedConn) Subscribe(context.Context, ...string) error   { return nil }
func (droppedConn) Unsubscribe(context.Context, ...string) error { return nil }
func (droppedConn) Ping(context.Context) error                   { return nil }
func (droppedConn) Close() error                                 { return nil }
func (droppedConn) Receive(context.Context) (backend.PubSubEvent, error) {
	return backend.PubSubEvent{}, errors.New("connection reset by peer")
}

// A connection lost before it answered anything counts as a failed dial:
// the delays grow, and a server that drops whatever it accepts is not
// dialled every 10-20ms.
func TestMuxBacksOffConnectionsLostBeforeAnswering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &droppingServer{}
		m := backend.NewMux(s, backend.MuxOptions{HealthCheck: time.Hour})
		defer m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := m.Subscribe(ctx, "ch"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Subscribe on a server that drops every connection: %v; want context.DeadlineExceeded", err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.times) < 5 {
			t.Fatalf("%d dials in 1s; want 5 or more", len(s.times))
		}
		// The 5th dial follows the 4th failure: a backoff of 80-160ms.
		if d := s.times[4].Sub(s.times[3]); d < 80*time.Millisecond {
			t.Errorf("the 5th dial came %v after the 4th, after 4 connections lost unanswered; want 80ms or more", d)
		}
		if n := len(s.times); n > 12 {
			t.Errorf("%d dials in 1s to a server that drops every connection; want the backoff to keep them under 12", n)
		}
	})
}

// pongThenRefuseServer answers the PING that a lazily dialling driver
// sends at dial (see PubSubDriver), then refuses SUBSCRIBE, as a server
// whose ACL allows no channel does behind go-redis.
type pongThenRefuseServer struct {
	mu    sync.Mutex
	times []time.Time
}

type pongThenRefuseConn struct{ ponged *bool }

func (s *pongThenRefuseServer) DialPubSub(context.Context, string) (backend.PubSubConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times = append(s.times, time.Now())
	return pongThenRefuseConn{new(bool)}, nil
}

func (pongThenRefuseConn) Subscribe(context.Context, ...string) error   { return nil }
func (pongThenRefuseConn) Unsubscribe(context.Context, ...string) error { return nil }
func (pongThenRefuseConn) Ping(context.Context) error                   { return nil }
func (pongThenRefuseConn) Close() error                                 { return nil }
func (c pongThenRefuseConn) Receive(context.Context) (backend.PubSubEvent, error) {
	if !*c.ponged {
		*c.ponged = true
		return backend.PubSubEvent{Kind: backend.PubSubOther}, nil // the dial's PONG
	}
	return backend.PubSubEvent{}, errors.New("NOPERM User has no permissions to access the 'ch' channel")
}

// The reply to the PING of a driver's dial is no answer to the Mux: a
// connection whose SUBSCRIBE is refused after it is lost like one that
// answered nothing, and the backoff grows.
func TestMuxBacksOffRefusedSubscribeAfterTheDialsPong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &pongThenRefuseServer{}
		m := backend.NewMux(s, backend.MuxOptions{HealthCheck: time.Hour})
		defer m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := m.Subscribe(ctx, "ch"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Subscribe refused by the server: %v; want context.DeadlineExceeded", err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if n := len(s.times); n > 12 {
			t.Errorf("%d dials in 1s to a server that refuses SUBSCRIBE; want the backoff to keep them under 12", n)
		}
	})
}
