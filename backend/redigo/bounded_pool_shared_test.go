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
