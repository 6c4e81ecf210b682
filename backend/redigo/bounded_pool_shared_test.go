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

	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// gatedDialer is a pool's dialer whose connections numbered in stalled (the
// first dialed is 1) read nothing until open is called: a round trip on
// one stays in flight.
type gatedDialer struct {
	addr    string
	stalled map[int32]bool
	dials   atomic.Int32
	reading chan struct{} // receives once per stalled connection that starts to read
	gate    chan struct{}
	once    sync.Once
}

func newGatedDialer(addr string, stalled ...int32) *gatedDialer {
	d := &gatedDialer{addr: addr, stalled: map[int32]bool{}, reading: make(chan struct{}, len(stalled)), gate: make(chan struct{})}
	for _, n := range stalled {
		d.stalled[n] = true
	}
	return d
}

func (d *gatedDialer) dial() (redis.Conn, error) {
	nc, err := net.Dial("tcp", d.addr)
	if err != nil {
		return nil, err
	}
	if d.stalled[d.dials.Add(1)] {
		nc = &gatedConn{Conn: nc, d: d}
	}
	return redis.NewConn(nc, 0, 0), nil
}

func (d *gatedDialer) open() { d.once.Do(func() { close(d.gate) }) }

type gatedConn struct {
	net.Conn
	d       *gatedDialer
	started sync.Once
}

func (c *gatedConn) Read(p []byte) (int, error) {
	c.started.Do(func() { c.d.reading <- struct{}{} })
	<-c.d.gate
	return c.Conn.Read(p)
}

// stalledCall starts a call on b whose round trip stays on the wire (on a
// stalled connection of d) until d.open, and returns its result.
func stalledCall(t *testing.T, b *redigo.Backend, d *gatedDialer) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		r, err := b.Eval(context.Background(), first, nil)
		if err == nil && r != int64(1) {
			err = errors.New("wrong reply")
		}
		done <- err
	}()
	select {
	case <-d.reading:
	case err := <-done:
		t.Fatalf("a call returned before its round trip stalled: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a call never reached the server")
	}
	return done
}

// TestBoundedPoolSharedWithOthers: a pool that lends at most MaxActive
// connections and fails a borrow beyond (Wait false) is the application's,
// shared with its own code or with another Backend, which counted on the
// one connection a Backend takes at a time. Over it, a call made while
// another's round trip is on the wire waits for that round trip, as over
// a pool that lends one, instead of asking for a connection the pool has
// not got and failing with ErrPoolExhausted (which TryLock reports to its
// caller).
func TestBoundedPoolSharedWithOthers(t *testing.T) {
	srv := harness.Standalone(t)
	for _, tc := range []struct {
		name    string
		stalled []int32
		// other takes the pool's second connection, and returns what
		// gives it back.
		other func(t *testing.T, pool *redis.Pool, d *gatedDialer) func()
	}{
		{"the application's connection", []int32{1}, func(t *testing.T, pool *redis.Pool, d *gatedDialer) func() {
			c := pool.Get()
			if _, err := c.Do("PING"); err != nil {
				t.Fatal(err)
			}
			return func() { c.Close() }
		}},
		{"another Backend's call in flight", []int32{1, 2}, func(t *testing.T, pool *redis.Pool, d *gatedDialer) func() {
			other := redigo.New(pool)
			done := stalledCall(t, other, d)
			return func() {
				d.open()
				if err := <-done; err != nil {
					t.Errorf("the other Backend's call: %v", err)
				}
				other.Close()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newGatedDialer(srv.Addr(), tc.stalled...)
			pool := &redis.Pool{MaxIdle: 4, MaxActive: 2, Dial: d.dial}
			b := redigo.New(pool)
			defer func() { d.open(); b.Close(); pool.Close() }()

			done := stalledCall(t, b, d)
			giveBack := tc.other(t, pool, d)
			defer giveBack()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			r, err := b.Eval(ctx, second, nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a call beside a round trip in flight, over a pool of two lent at once: %v, %v; want it to wait for its turn (here until its deadline)", r, err)
			}
			d.open()
			if err := <-done; err != nil {
				t.Fatalf("the stalled call: %v", err)
			}
			if r, err := b.Eval(context.Background(), second, nil); err != nil || r != int64(2) {
				t.Errorf("a call once the round trip returned: %v, %v; want 2", r, err)
			}
		})
	}
}
