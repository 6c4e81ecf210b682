package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestBackendContract runs the adapter's rules alone
// (conformance.RunBackend), as an adapter's author runs them first, on a
// private redis-server.
func TestBackendContract(t *testing.T) {
	srv := harness.Standalone(t)
	conformance.RunBackend(t, func(t *testing.T) backend.Backend {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		b := goredis.New(c, goredis.WithHealthCheck(healthCheck))
		t.Cleanup(func() { b.Close(); c.Close() })
		return b
	}, conformance.WithHealthCheck(healthCheck), conformance.WithHooks(srv.Hooks()), conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		a, b := goredis.New(c), goredis.New(c)
		t.Cleanup(func() { a.Close(); b.Close(); c.Close() })
		return a, b
	}))
}
