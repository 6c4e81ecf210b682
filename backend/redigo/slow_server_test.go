package redigo_test

import (
	"context"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// A server that answers late, or stalls, with a context that can be
// cancelled but has no deadline (tests/fault runs every primitive so).
func TestSlowServer(t *testing.T) {
	harness.SlowServer(t, func(t *testing.T, addr string) backend.Backend {
		pool := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		}}
		b := redigo.New(pool)
		t.Cleanup(func() { b.Close(); pool.Close() })
		return b
	})
}
