package goredis_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/conformance/harness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// healthCheck is the pub/sub health-check interval of the suite's
// backends: shorter than the default, so that the suite's idle test
// (three intervals) is short too.
const healthCheck = time.Second

// The backend rules on a standalone server are TestBackendContract's;
// every primitive runs over go-redis on a cluster, and on a standalone
// server over rueidis and redigo.

// TestConformanceCluster runs the suite on a 3-master Redis Cluster.
func TestConformanceCluster(t *testing.T) {
	cl := harness.NewCluster(t, 3)
	conformance.Run(t, func(t *testing.T) backend.Backend {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
		b := goredis.New(c, goredis.WithHealthCheck(healthCheck))
		t.Cleanup(func() { b.Close(); c.Close() })
		return b
	}, conformance.WithHealthCheck(healthCheck), conformance.WithHooks(cl.Hooks()), conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
		a, b := goredis.New(c), goredis.New(c)
		t.Cleanup(func() { a.Close(); b.Close(); c.Close() })
		return a, b
	}))
}

// TestConformanceSentinel runs the backend rules on a primary with a
// replica, found through Sentinel by a failover client: once found, it is
// a standalone server to the primitives. sentinel_test.go fails it over.
func TestConformanceSentinel(t *testing.T) {
	s := harness.NewSentinel(t)
	conformance.RunBackend(t, func(t *testing.T) backend.Backend {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: harness.MasterName, SentinelAddrs: s.SentinelAddrs()})
		b := goredis.New(c, goredis.WithHealthCheck(healthCheck))
		t.Cleanup(func() { b.Close(); c.Close() })
		return b
	}, conformance.WithHealthCheck(healthCheck), conformance.WithHooks(s.Hooks()), conformance.WithoutHooks("Restart"), conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: harness.MasterName, SentinelAddrs: s.SentinelAddrs()})
		a, b := goredis.New(c), goredis.New(c)
		t.Cleanup(func() { a.Close(); b.Close(); c.Close() })
		return a, b
	}))
}
