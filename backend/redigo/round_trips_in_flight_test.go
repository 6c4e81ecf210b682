package redigo_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// stalledFirst is a pool's dialer whose first connection reads nothing
// until release is called: a round trip on it stays in flight.
type stalledFirst struct {
	addr    string
	dials   atomic.Int32
	reading chan struct{} // closed when the first connection starts to read
	gate    chan struct{}
	once    sync.Once
}

func newStalledFirst(addr string) *stalledFirst {
	return &stalledFirst{addr: addr, reading: make(chan struct{}), gate: make(chan struct{})}
}

func (d *stalledFirst) dial() (redis.Conn, error) {
	nc, err := net.Dial("tcp", d.addr)
	if err != nil {
		return nil, err
	}
	if d.dials.Add(1) == 1 {
		nc = &stalledConn{Conn: nc, d: d}
	}
	return redis.NewConn(nc, 0, 0), nil
}

func (d *stalledFirst) release() { d.once.Do(func() { close(d.gate) }) }

type stalledConn struct {
	net.Conn
	d       *stalledFirst
	started sync.Once
}

func (c *stalledConn) Read(p []byte) (int, error) {
	c.started.Do(func() { close(c.d.reading) })
	<-c.d.gate
	return c.Conn.Read(p)
}

var (
	first  = backend.NewScript("return 1")
	second = backend.NewScript("return 2")
)

// stallFirstCall starts a call on b whose round trip stays on the wire
// (the first connection d dials) until d.release, and returns its result.
func stallFirstCall(t *testing.T, b *redigo.Backend, d *stalledFirst) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		r, err := b.Eval(context.Background(), first, nil)
		if err == nil && r != int64(1) {
			err = errors.New("first call: wrong reply")
		}
		done <- err
	}()
	select {
	case <-d.reading:
	case err := <-done:
		t.Fatalf("the first call returned before its round trip stalled: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first call never reached the server")
	}
	return done
}

// TestTwoRoundTripsInFlight: over a pool that keeps connections idle, a
// call made while another's round trip is on the wire goes out on a
// second connection and returns, instead of waiting for the first.
func TestTwoRoundTripsInFlight(t *testing.T) {
	srv := harness.Standalone(t)
	d := newStalledFirst(srv.Addr())
	pool := &redis.Pool{MaxIdle: 4, Dial: d.dial}
	b := redigo.New(pool)
	defer func() { d.release(); b.Close(); pool.Close() }()

	done := stallFirstCall(t, b, d)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := b.Eval(ctx, second, nil)
	if err != nil || r != int64(2) {
		t.Fatalf("a call beside a stalled round trip: %v, %v; want 2 while the first is in flight", r, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the first call returned before its round trip was released: %v", err)
	default:
	}
	if n := d.dials.Load(); n != 2 {
		t.Errorf("%d connections dialed, want 2", n)
	}
	d.release()
	if err := <-done; err != nil {
		t.Fatalf("the first call: %v", err)
	}
}

// TestOneRoundTripOverASmallPool: a pool that keeps fewer than two
// connections idle, or lends one at most, gets one round trip at a time:
// a call made while another's is on the wire waits in the queue (here
// until its deadline), and no second connection is dialed or asked for.
func TestOneRoundTripOverASmallPool(t *testing.T) {
	srv := harness.Standalone(t)
	for _, tc := range []struct {
		name string
		pool func(dial func() (redis.Conn, error)) *redis.Pool
	}{
		{"MaxIdle 1", func(dial func() (redis.Conn, error)) *redis.Pool {
			return &redis.Pool{MaxIdle: 1, Dial: dial}
		}},
		{"MaxIdle 0", func(dial func() (redis.Conn, error)) *redis.Pool {
			return &redis.Pool{Dial: dial}
		}},
		// A second call on the Pipeline's second round trip would find
		// the pool exhausted at once, and fail with that.
		{"MaxActive 1", func(dial func() (redis.Conn, error)) *redis.Pool {
			return &redis.Pool{MaxIdle: 4, MaxActive: 1, Dial: dial}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newStalledFirst(srv.Addr())
			pool := tc.pool(d.dial)
			b := redigo.New(pool)
			defer func() { d.release(); b.Close(); pool.Close() }()

			done := stallFirstCall(t, b, d)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			r, err := b.Eval(ctx, second, nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a call beside a stalled round trip: %v, %v; want it held back until its deadline", r, err)
			}
			if n := d.dials.Load(); n != 1 {
				t.Errorf("%d connections dialed, want 1", n)
			}
			d.release()
			if err := <-done; err != nil {
				t.Fatalf("the first call: %v", err)
			}
		})
	}
}
