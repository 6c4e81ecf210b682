package conformance_test

import (
	"context"
	"testing"

	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The test an adapter's package runs: a fresh backend per call, all on the
// same throwaway server, and the fault hooks the harness can provide.
func testConformance(t *testing.T) {
	const addr = "127.0.0.1:6379" // a server the test may disturb
	conformance.Run(t, func(t *testing.T) backend.Backend {
		pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
		b := redigo.New(pool)
		t.Cleanup(func() { b.Close(); pool.Close() })
		return b
	}, conformance.WithHooks(conformance.Hooks{
		FlushScripts: func(ctx context.Context) error {
			c, err := redis.DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = redis.DoContext(c, ctx, "SCRIPT", "FLUSH")
			return err
		},
	}))
}

func ExampleRun() {
	// In the adapter's _test.go file:
	//
	//	func TestConformance(t *testing.T) { testConformance(t) }
	_ = testConformance
}
