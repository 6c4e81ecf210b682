// An adapter's conformance test, complete: copy this file next to your
// adapter and replace the redigo lines (the adapter shipped with dsync,
// standing in for yours) with your client and your adapter.
// conformance.RunBackend checks the backend rules alone, and says what
// each failure usually means: make it pass first. conformance.Run then
// checks them again and every primitive over your adapter. Both run on
// private redis-servers that package harness starts on loopback: a
// standalone server here, a cluster and a Sentinel set in the commented
// variants.
// redis-server (and redis-sentinel) must be on PATH; without them the tests
// skip, or fail under DSYNC_REQUIRE_REDIS=1. On a slow machine, widen the
// timing bounds: DSYNC_CONFORMANCE_TIMESCALE=3 go test. Until dsync is
// tagged, your module requires it through a checkout (the README's
// Adapters section has the two commands).
package myadapter_test

import (
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo" // your adapter
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// The suite checks that a closed backend leaves no goroutine behind; so
// does the whole test binary. Goroutines your client keeps after its own
// Close (a topology refresher, say) are named here and given to the suite
// with conformance.WithLeakOptions.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// healthCheck is how often the adapter pings an idle pub/sub connection.
// The suite's idle test waits three intervals, so a short one keeps it
// short. A client that pings by itself: give its own interval.
const healthCheck = time.Second

// newClient makes the client a program would give your adapter.
func newClient(srv *harness.Server) *redis.Pool {
	return &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", srv.Addr()) }}
}

// options are the suite's options for the server srv.
func options(srv *harness.Server) []conformance.Option {
	return []conformance.Option{
		conformance.WithHealthCheck(healthCheck),
		// Every fault the suite injects: SCRIPT FLUSH, killed pub/sub
		// connections, a restart, connection counts.
		conformance.WithHooks(srv.Hooks()),
		// Two backends over one client, to check that closing one leaves
		// the client (yours, not the adapter's) working for the other. The
		// cleanup closes the backends and then the client: the suite
		// closes neither.
		conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
			c := newClient(srv)
			a, b := redigo.New(c), redigo.New(c)
			t.Cleanup(func() { a.Close(); b.Close(); c.Close() })
			return a, b
		}),
	}
}

// newBackend returns the suite's factory: a fresh backend, on a client of
// its own, for every call (tests use several to stand for processes),
// both closed when t ends.
func newBackend(srv *harness.Server) conformance.NewBackend {
	return func(t *testing.T) backend.Backend {
		c := newClient(srv)
		b := redigo.New(c, redigo.WithHealthCheck(healthCheck))
		t.Cleanup(func() { b.Close(); c.Close() })
		return b
	}
}

// TestBackend checks the adapter's rules: go test -run TestBackend.
func TestBackend(t *testing.T) {
	srv := harness.Standalone(t) // stopped when the test ends
	conformance.RunBackend(t, newBackend(srv), options(srv)...)
}

// TestConformance checks the rules and every primitive over the adapter.
func TestConformance(t *testing.T) {
	if testing.Short() { // the whole suite takes a minute or two
		t.Skip("the conformance suite: skipped under -short")
	}
	srv := harness.Standalone(t)
	conformance.Run(t, newBackend(srv), options(srv)...)
}

// For a client that speaks to Redis Cluster, the same with
//
//	cl := harness.NewCluster(t, 3) // cl.Addrs() are the seeds; cl.Hooks()
//
// and an adapter that reports backend.Sharded. Behind Sentinel:
//
//	s := harness.NewSentinel(t) // s.SentinelAddrs(), harness.MasterName
//	conformance.WithHooks(s.Hooks()), conformance.WithoutHooks("Restart")
//
// since the Sentinel set cannot restart its primary under the suite (a
// restarted primary would race the failover): the Restart case skips.
