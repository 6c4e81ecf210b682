// Package testserver starts the real redis-server that dsync's tests run
// against, and injects faults into it.
//
// Real starts a redis-server on a free loopback port in a temporary
// directory, with persistence off and DEBUG enabled for local clients
// (package conformance/harness starts it), or uses the server at
// $DSYNC_REDIS_ADDR. When redis-server is not on PATH,
// Real skips the test, or fails it when $DSYNC_REQUIRE_REDIS=1. Embedded
// servers (miniredis, in real or fake time) are in the tests module's
// package fake, so that this module does not require miniredis.
//
// Tests use it only; nothing here is part of dsync's API.
package testserver

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// Server is a server the tests may talk to and, where supported, disturb.
type Server struct {
	addr string
	srv  *harness.Server // a redis-server we started; nil for $DSYNC_REDIS_ADDR
}

// Addr returns host:port.
func (s *Server) Addr() string { return s.addr }

// RequireRedis reports whether a missing redis-server fails tests instead of
// skipping them.
func RequireRedis() bool { return harness.RequireRedis() }

// RedisAvailable reports whether Real can provide a server.
func RedisAvailable() bool {
	return os.Getenv("DSYNC_REDIS_ADDR") != "" || harness.Available()
}

// StartRedis starts a private redis-server (package conformance/harness),
// or connects to $DSYNC_REDIS_ADDR. The caller stops it with Stop.
func StartRedis() (*Server, error) {
	if addr := os.Getenv("DSYNC_REDIS_ADDR"); addr != "" {
		return &Server{addr: addr}, nil
	}
	srv, err := harness.StartServer(context.Background())
	if err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	return &Server{addr: srv.Addr(), srv: srv}, nil
}

// ExampleBackend starts a private redis-server for a package's runnable
// examples and returns a redigo backend on it, with a function that closes
// the backend and stops the server. In production, pass the *redis.Pool
// the service already has. Without redis-server on PATH the examples do
// not run (see Main).
func ExampleBackend() (backend.Backend, func()) {
	srv, err := StartRedis()
	if err != nil {
		log.Fatal(err)
	}
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", srv.Addr()) }}
	b := bredigo.New(pool)
	return b, func() { b.Close(); pool.Close(); srv.Stop() }
}

// Stop stops a server that StartRedis started. It is idempotent.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Close()
	}
}

var (
	shared   = map[string]*Server{}
	sharedMu sync.Mutex
)

// Real returns the package's shared real server, starting it on first use.
// It skips t when redis-server is missing, unless $DSYNC_REQUIRE_REDIS=1.
func Real(t testing.TB) *Server {
	t.Helper()
	if !RedisAvailable() {
		if RequireRedis() {
			t.Fatal("testserver: redis-server is not on PATH and DSYNC_REQUIRE_REDIS=1")
		}
		t.Skip("testserver: redis-server is not on PATH; set DSYNC_REQUIRE_REDIS=1 to fail instead")
	}
	return sharedServer(t, "redis", StartRedis)
}

func sharedServer(t testing.TB, kind string, start func() (*Server, error)) *Server {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if s := shared[kind]; s != nil {
		return s
	}
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	shared[kind] = s
	return s
}

// StopShared stops the shared servers; call it from TestMain after m.Run.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for k, s := range shared {
		s.Stop()
		delete(shared, k)
	}
}

// Pool returns a redigo pool for the server; the caller closes it.
func (s *Server) Pool() *redis.Pool {
	addr := s.addr
	return &redis.Pool{
		MaxIdle:     64,
		IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
	}
}

// NewBackend returns a redigo backend with a pool of its own, closed when t
// ends, as a separate process would have.
func (s *Server) NewBackend(t testing.TB, opts ...bredigo.Option) backend.Backend {
	pool := s.Pool()
	b := bredigo.New(pool, opts...)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b
}

// Do runs one command on a fresh connection.
func (s *Server) Do(ctx context.Context, cmd string, args ...any) (any, error) {
	c, err := redis.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return redis.DoContext(c, ctx, cmd, args...)
}

// FlushScripts empties the server's script cache.
func (s *Server) FlushScripts(ctx context.Context) error {
	_, err := s.Do(ctx, "SCRIPT", "FLUSH")
	return err
}

// KillPubSub closes every pub/sub client connection.
func (s *Server) KillPubSub(ctx context.Context) error {
	_, err := s.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub")
	return err
}

// PubSubClients counts the connections in pub/sub mode.
func (s *Server) PubSubClients(ctx context.Context) (int, error) {
	reply, err := redis.String(s.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(reply, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n, nil
}

// CommandCalls returns the calls of every command the server ran but
// INFO, scripts' inner calls included, by command (INFO commandstats).
func (s *Server) CommandCalls(ctx context.Context) (map[string]int64, error) {
	v, err := redis.String(s.Do(ctx, "INFO", "commandstats"))
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(v, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || name == "info" {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		calls[name], _ = strconv.ParseInt(n, 10, 64)
	}
	return calls, nil
}

// FewestCalls runs fn rounds times and returns the commands the server ran
// during the round that ran fewest (by command, and their sum), scripts'
// inner calls included; INFO and pub/sub's own commands (SUBSCRIBE,
// UNSUBSCRIBE, PING) are left out. INFO counts every client's calls: the
// fewest of a few rounds leaves out a stray one from elsewhere.
func (s *Server) FewestCalls(ctx context.Context, rounds int, fn func()) (map[string]int64, int64, error) {
	var best map[string]int64
	var fewest int64 = -1
	for range rounds {
		before, err := s.CommandCalls(ctx)
		if err != nil {
			return nil, 0, err
		}
		fn()
		after, err := s.CommandCalls(ctx)
		if err != nil {
			return nil, 0, err
		}
		diff, sum := map[string]int64{}, int64(0)
		for name, n := range after {
			switch name {
			case "subscribe", "unsubscribe", "ping":
				continue
			}
			if d := n - before[name]; d != 0 {
				diff[name] = d
				sum += d
			}
		}
		if fewest < 0 || sum < fewest {
			best, fewest = diff, sum
		}
	}
	return best, fewest, nil
}

// Pause makes the server unresponsive for d with DEBUG SLEEP, and returns
// when the pause is over.
func (s *Server) Pause(ctx context.Context, d time.Duration) error {
	_, err := s.Do(ctx, "DEBUG", "SLEEP", fmt.Sprintf("%.3f", d.Seconds()))
	return err
}

// Restartable reports whether Restart can work: not on a server the tests
// did not start.
func (s *Server) Restartable() bool { return s.srv != nil }

// Restart stops the server and starts it again on the same address. It
// comes back empty, and every client connection is dropped.
func (s *Server) Restart(ctx context.Context) error {
	if s.srv == nil {
		return fmt.Errorf("testserver: cannot restart an external server")
	}
	return s.srv.Node().Restart(ctx)
}
