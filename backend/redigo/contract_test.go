package redigo_test

import (
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestBackendContract runs the adapter's rules alone
// (conformance.RunBackend), as an adapter's author runs them first, on a
// private redis-server.
func TestBackendContract(t *testing.T) {
	srv := harness.Standalone(t)
	newPool := func() *redis.Pool {
		return &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", srv.Addr()) }}
	}
	conformance.RunBackend(t, func(t *testing.T) backend.Backend {
		pool := newPool()
		b := redigo.New(pool, redigo.WithHealthCheck(time.Second))
		t.Cleanup(func() { b.Close(); pool.Close() })
		return b
	}, conformance.WithHealthCheck(time.Second), conformance.WithHooks(srv.Hooks()),
		conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
			pool := newPool()
			a, b := redigo.New(pool), redigo.New(pool)
			t.Cleanup(func() { a.Close(); b.Close(); pool.Close() })
			return a, b
		}))
}
