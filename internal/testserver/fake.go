package testserver

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
)

// Fake starts an in-process miniredis for a testing/synctest bubble:
// connections are in-memory pipes (Dial), and TTLs follow the bubble's
// fake clock, so a 30s lease passes in no real time. Call it inside the
// bubble; it is closed when t ends.
func Fake(t testing.TB) *miniredis.Miniredis {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	t.Cleanup(m.Close)
	return m
}

// FakeBackend returns a redigo backend on m with a pool of its own, both
// closed when t ends.
func FakeBackend(t testing.TB, m *miniredis.Miniredis, opts ...bredigo.Option) backend.Backend {
	pool := &redis.Pool{
		// Bounded, so that the in-process server's goroutines (two per
		// connection) do not vary with how many calls overlap.
		MaxIdle:   4,
		MaxActive: 4,
		Wait:      true,
		Dial: func() (redis.Conn, error) {
			c, err := m.Dial()
			if err != nil {
				return nil, err
			}
			return redis.NewConn(c, 0, 0), nil
		},
	}
	b := bredigo.New(pool, opts...)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b
}
