package backend_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// unansweredServer answers its first dial; every later one waits for its
// context, as a dial to a server that stopped answering does.
type unansweredServer struct {
	*fakeServer
	mu    sync.Mutex
	dials int
}

func (s *unansweredServer) DialPubSub(ctx context.Context, route string) (backend.PubSubConn, error) {
	s.mu.Lock()
	s.dials++
	n := s.dials
	s.mu.Unlock()
	if n > 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.fakeServer.DialPubSub(ctx, route)
}

// Close ends the connection and dials no other, whatever the connection's
// age: one that served a second or more is dialled again at once when it
// is lost, but not when Close is what ended it. A dial there would cost
// the server a connection for nothing, and Close the dial's time (up to
// two seconds where the server does not answer).
func TestMuxCloseDialsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &unansweredServer{fakeServer: &fakeServer{}}
		m := backend.NewMux(s, backend.MuxOptions{HealthCheck: time.Hour})
		sub, err := m.Subscribe(context.Background(), "ch")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()

		time.Sleep(2 * time.Second) // the connection serves
		start := time.Now()
		m.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v; want it to return at once", d)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.dials != 1 {
			t.Errorf("%d dials; want 1: Close dialled a connection", s.dials)
		}
	})
}
