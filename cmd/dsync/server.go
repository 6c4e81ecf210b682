package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
)

// server is where a command's backends connect: the -redis address, or an
// embedded miniredis.
type server struct {
	addr string
	mini *miniredis.Miniredis
}

func openServer(addr string) (*server, error) {
	if addr != "" {
		c, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		defer c.Close()
		if _, err := c.Do("PING"); err != nil {
			return nil, fmt.Errorf("ping %s: %w", addr, err)
		}
		return &server{addr: addr}, nil
	}
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, err
	}
	m.ClockTTL(true) // leases expire on the clock, as on a real server
	return &server{addr: m.Addr(), mini: m}, nil
}

func (s *server) String() string {
	if s.mini != nil {
		return "embedded miniredis at " + s.addr
	}
	return "redis at " + s.addr
}

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
	addr := s.addr
	pool := &redis.Pool{
		MaxIdle: 16,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
	}
	return &client{pool: pool, b: bredigo.New(pool)}
}

func (c *client) close() {
	c.b.Close()
	c.pool.Close()
}
