package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// refusingServer is a driver whose every dial fails, as a server that is
// down refuses connections.
type refusingServer struct{}

var errRefused = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

func (refusingServer) DialPubSub(context.Context, string) (backend.PubSubConn, error) {
	return nil, errRefused
}

// A Subscribe whose context ends while the Mux cannot dial its connection
// fails with the context's error, and says why it could not subscribe:
// the last dial's error. Without it, a caller that logs the failure (an
// election observer, a hub) reports a deadline and nothing of the server.
func TestMuxSubscribeNamesTheDialError(t *testing.T) {
	m := backend.NewMux(refusingServer{}, backend.MuxOptions{MaxBackoff: time.Millisecond})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := m.Subscribe(ctx, "ch")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), errRefused.Error()) {
		t.Fatalf("Subscribe while every dial fails: %v; want an error matching context.DeadlineExceeded that names the dial's error (%v)", err, errRefused)
	}
}
