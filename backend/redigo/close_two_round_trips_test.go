package redigo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// Guard (passes on d224b08): Close, while two round trips are on the wire
// (one sent on its caller's goroutine, one batch) and a call waits in the
// queue behind them, fails the queued call with ErrClosed at once, returns
// once the batch has, and the calls on the wire get their replies. The
// package's TestMain finds no goroutine left behind.
func TestCloseWithTwoRoundTripsInFlight(t *testing.T) {
	srv := harness.Standalone(t)
	d := newGatedDialer(srv.Addr(), 1, 2)
	pool := &redis.Pool{MaxIdle: 4, Dial: d.dial}
	b := redigo.New(pool)
	defer func() { d.open(); b.Close(); pool.Close() }()

	direct := stalledCall(t, b, d) // on its caller's goroutine, connection 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	batched := make(chan error, 1)
	go func() {
		_, err := b.Eval(ctx, second, nil) // cancellable: a batch, connection 2
		batched <- err
	}()
	select {
	case <-d.reading:
	case err := <-batched:
		t.Fatalf("the batch returned before its round trip stalled: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the batch never reached the server")
	}
	queued := make(chan error, 1)
	go func() {
		_, err := b.Eval(ctx, second, nil)
		queued <- err
	}()
	// The third call is queued (or about to be): Close fails it either way.
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case err := <-queued:
		if !errors.Is(err, backend.ErrClosed) {
			t.Errorf("a call queued at Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call queued at Close did not return while the round trips stalled")
	}
	d.open()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the round trips had")
	}
	for name, c := range map[string]<-chan error{"the direct call": direct, "the batch": batched} {
		if err := <-c; err != nil {
			t.Errorf("%s, on the wire at Close: %v", name, err)
		}
	}
}
