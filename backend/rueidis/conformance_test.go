package rueidis_test

import (
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// rueidis's cluster client closes connections it dropped from its
// topology 5s later, on a goroutine that outlives the client's Close.
var lateClose = goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, lateClose) }

// The client's own goroutines, which it starts when it first needs them
// and keeps until it closes: a connection's reader and writer, for a
// cluster node first reached after the backend's first call, and a
// delayed topology refresh. Connections the adapter leaves open are
// counted on the server instead (the PubSubClients hook).
var clientOwn = []goleak.Option{lateClose,
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background.func1"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
}

// run runs suite (conformance.Run, or RunBackend for the backend rules
// alone) on the servers that clients made with opt reach.
func run(t *testing.T, suite func(*testing.T, conformance.NewBackend, ...conformance.Option), opt rueidis.ClientOption, hooks conformance.Hooks, without ...string) {
	client := func(t *testing.T) rueidis.Client {
		c, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const healthCheck = time.Second
	suite(t, func(t *testing.T) backend.Backend {
		c := client(t)
		b := dsyncrueidis.New(c, dsyncrueidis.WithPubSub(backend.MuxOptions{HealthCheck: healthCheck}))
		t.Cleanup(func() { b.Close(); c.Close() })
		return b
	}, conformance.WithHealthCheck(healthCheck), conformance.WithHooks(hooks), conformance.WithoutHooks(without...), conformance.WithLeakOptions(clientOwn...),
		conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
			c := client(t)
			a, b := dsyncrueidis.New(c), dsyncrueidis.New(c)
			t.Cleanup(func() { a.Close(); b.Close(); c.Close() })
			return a, b
		}))
}

// Every primitive runs on a standalone server; the backend rules alone
// without auto-pipelining, on a cluster (where backend/goredis runs every
// primitive) and behind Sentinel.
func TestConformance(t *testing.T) {
	srv := harness.Standalone(t)
	run(t, conformance.Run, rueidis.ClientOption{InitAddress: []string{srv.Addr()}}, srv.Hooks())
}

func TestConformanceWithoutAutoPipelining(t *testing.T) {
	srv := harness.Standalone(t)
	run(t, conformance.RunBackend, rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableAutoPipelining: true}, srv.Hooks())
}

func TestConformanceCluster(t *testing.T) {
	cl := harness.NewCluster(t, 3)
	run(t, conformance.RunBackend, rueidis.ClientOption{InitAddress: cl.Addrs()}, cl.Hooks())
}

func TestConformanceSentinel(t *testing.T) {
	s := harness.NewSentinel(t)
	run(t, conformance.RunBackend, rueidis.ClientOption{InitAddress: s.SentinelAddrs(), Sentinel: rueidis.SentinelOption{MasterSet: harness.MasterName}}, s.Hooks(), "Restart")
}
