package redigo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestTwoRoundTripsInFlight: over a pool that keeps connections idle, a
// call made while another's round trip is on the wire goes out on a
// second connection and returns, instead of waiting for the first.
func TestTwoRoundTripsInFlight(t *testing.T) {
	srv := harness.Standalone(t)
	d := newGatedDialer(srv.Addr(), 1)
	pool := &redis.Pool{MaxIdle: 4, Dial: d.dial}
	b := redigo.New(pool)
	defer func() { d.open(); b.Close(); pool.Close() }()

	done := stalledCall(t, b, d)
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
	d.open()
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
			d := newGatedDialer(srv.Addr(), 1)
			pool := tc.pool(d.dial)
			b := redigo.New(pool)
			defer func() { d.open(); b.Close(); pool.Close() }()

			done := stalledCall(t, b, d)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			r, err := b.Eval(ctx, second, nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a call beside a stalled round trip: %v, %v; want it held back until its deadline", r, err)
			}
			if n := d.dials.Load(); n != 1 {
				t.Errorf("%d connections dialed, want 1", n)
			}
			d.open()
			if err := <-done; err != nil {
				t.Fatalf("the first call: %v", err)
			}
		})
	}
}
