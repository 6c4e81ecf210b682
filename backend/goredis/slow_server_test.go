package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// A server that answers late, or stalls, with a context that can be
// cancelled but has no deadline: go-redis reacts to a call's deadline on
// the connection, which must not cut a call the context leaves alive.
func TestSlowServer(t *testing.T) {
	harness.SlowServer(t, func(t *testing.T, addr string) backend.Backend {
		c := redis.NewClient(&redis.Options{Addr: addr})
		b := goredis.New(c)
		t.Cleanup(func() { b.Close(); c.Close() })
		return b
	})
}
