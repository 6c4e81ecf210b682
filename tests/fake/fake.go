// Package fake provides the embedded servers of dsync's tests: miniredis
// on loopback, and miniredis inside a testing/synctest bubble, whose TTLs
// follow the bubble's fake clock. It lives in a module of its own so that
// the library's module does not require miniredis.
package fake

import (
	"context"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

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

// Server is an embedded miniredis on loopback whose TTLs follow the wall
// clock.
type Server struct {
	mu   sync.Mutex
	mini *miniredis.Miniredis
}

var (
	shared   *Server
	sharedMu sync.Mutex
)

// Mini returns the package's shared embedded miniredis, starting it on
// first use. StopShared stops it.
func Mini(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		m.ClockTTL(true)
		shared = &Server{mini: m}
	}
	return shared
}

// StopShared stops the shared server; call it from TestMain after m.Run.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.mini.Close()
		shared = nil
	}
}

// Addr returns host:port.
func (s *Server) Addr() string { return s.mini.Addr() }

// NewBackend returns a redigo backend with a pool of its own, closed when t
// ends, as a separate process would have.
func (s *Server) NewBackend(t testing.TB, opts ...bredigo.Option) backend.Backend {
	addr := s.Addr()
	pool := &redis.Pool{
		MaxIdle: 64,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
	}
	b := bredigo.New(pool, opts...)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b
}

// NewBackendPair returns two redigo backends over one pool, closed when t
// ends: the pool after both backends.
func (s *Server) NewBackendPair(t testing.TB) (backend.Backend, backend.Backend) {
	addr := s.Addr()
	pool := &redis.Pool{
		MaxIdle: 64,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
	}
	a, b := bredigo.New(pool), bredigo.New(pool)
	t.Cleanup(func() {
		a.Close()
		b.Close()
		pool.Close()
	})
	return a, b
}

// FlushScripts empties the server's script cache.
func (s *Server) FlushScripts(ctx context.Context) error {
	c, err := redis.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = redis.DoContext(c, ctx, "SCRIPT", "FLUSH")
	return err
}

// Restart stops the server and starts it again on the same address. It
// keeps its data; every client connection is dropped.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mini.Close()
	return s.mini.Restart()
}

// LeakOptions ignores the goroutines of an embedded server that a test
// restarted.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).serve"),
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer"),
		// A connection's reader, alive while a pool keeps the connection.
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer.func2"),
	}
}
