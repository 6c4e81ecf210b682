package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/observe"
)

// server is where a command's backends connect: the -redis address, or an
// embedded miniredis.
type server struct {
	addr    string
	mini    *miniredis.Miniredis
	timeout time.Duration // bounds dialing and each read and write

	observer *observe.Observer // of every client's backend, if set
}

// openServer checks that the server at addr answers a PING within
// timeout, or, if addr is empty, starts an embedded miniredis.
func openServer(ctx context.Context, addr string, timeout time.Duration) (*server, error) {
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	if addr != "" {
		s := &server{addr: addr, timeout: timeout}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c, err := s.dial(ctx)
		if err != nil {
			if isTimeout(err) {
				return nil, fmt.Errorf("connect to %s: no connection within %v (%w)", addr, timeout, err)
			}
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		defer c.Close()
		if _, err := redis.DoContext(c, ctx, "PING"); err != nil {
			if isTimeout(err) {
				return nil, fmt.Errorf("ping %s: no answer within %v (%w)", addr, timeout, err)
			}
			return nil, fmt.Errorf("ping %s: %w", addr, err)
		}
		return s, nil
	}
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, err
	}
	m.ClockTTL(true) // leases expire on the clock, as on a real server
	return &server{addr: m.Addr(), mini: m, timeout: timeout}, nil
}

// dial opens a connection whose dial, reads and writes are bounded by the
// server's timeout, so that a server that accepts and never answers is an
// error, not a hang. (The redigo backend reads its pub/sub connection with
// a timeout of its own, which overrides the read timeout.)
func (s *server) dial(ctx context.Context) (redis.Conn, error) {
	return redis.DialContext(ctx, "tcp", s.addr,
		redis.DialConnectTimeout(s.timeout),
		redis.DialReadTimeout(s.timeout),
		redis.DialWriteTimeout(s.timeout))
}

// isTimeout reports whether err is a deadline or a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func (s *server) String() string {
	if s.mini != nil {
		return "embedded miniredis at " + s.addr
	}
	return "redis at " + s.addr
}

func (s *server) embedded() bool { return s.mini != nil }

func (s *server) close() {
	if s.mini != nil {
		s.mini.Close()
	}
}

// client is one simulated process: a pool and a backend of its own.
type client struct {
	pool *redis.Pool
	b    *bredigo.Backend
}

func (s *server) client() *client {
	pool := &redis.Pool{
		MaxIdle:     16,
		IdleTimeout: time.Minute,
		DialContext: s.dial,
	}
	c := &client{pool: pool, b: bredigo.New(pool, bredigo.WithTimeout(s.timeout))}
	if s.observer != nil {
		observe.Set(c.b, s.observer)
	}
	return c
}

// do runs one command on a connection of c's pool, within the server's
// timeout.
func (c *client) do(ctx context.Context, timeout time.Duration, cmd string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := c.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return redis.DoContext(conn, ctx, cmd, args...)
}

func (c *client) close() {
	c.b.Close()
	c.pool.Close()
	observe.Set(c.b, nil)
}
