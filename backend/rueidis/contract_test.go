package rueidis_test

import (
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestBackendContract runs the adapter's rules alone
// (conformance.RunBackend), as an adapter's author runs them first, on a
// private redis-server.
func TestBackendContract(t *testing.T) {
	srv := harness.Standalone(t)
	opt := rueidis.ClientOption{InitAddress: []string{srv.Addr()}}
	client := func(t *testing.T) rueidis.Client {
		c, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const healthCheck = time.Second
	conformance.RunBackend(t, func(t *testing.T) backend.Backend {
		c := client(t)
		b := dsyncrueidis.New(c, dsyncrueidis.WithPubSub(backend.MuxOptions{HealthCheck: healthCheck}))
		t.Cleanup(func() { b.Close(); c.Close() })
		return b
	}, conformance.WithHealthCheck(healthCheck), conformance.WithHooks(srv.Hooks()), conformance.WithLeakOptions(clientOwn...),
		conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
			c := client(t)
			a, b := dsyncrueidis.New(c), dsyncrueidis.New(c)
			t.Cleanup(func() { a.Close(); b.Close(); c.Close() })
			return a, b
		}))
}
