package conformance_test

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/conformance/harness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The test file of an adapter (here redigo's): a private server started by
// package harness, a fresh backend per call, and every fault hook. On a
// cluster, harness.NewCluster and a cluster client; behind Sentinel,
// harness.NewSentinel, a failover client and WithoutHooks("Restart").
func testConformance(t *testing.T) {
	srv := harness.Standalone(t)
	conformance.Run(t, func(t *testing.T) backend.Backend {
		pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", srv.Addr()) }}
		b := redigo.New(pool)
		t.Cleanup(func() { b.Close(); pool.Close() })
		return b
	}, conformance.WithHooks(srv.Hooks()),
		conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
			pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", srv.Addr()) }}
			a, b := redigo.New(pool), redigo.New(pool)
			t.Cleanup(func() { a.Close(); b.Close(); pool.Close() })
			return a, b
		}))
}

func ExampleRun() {
	// In the adapter's _test.go file:
	//
	//	func TestConformance(t *testing.T) { testConformance(t) }
	_ = testConformance
}
