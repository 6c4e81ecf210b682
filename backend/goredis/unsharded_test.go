package goredis_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// unshardedAddrs names the cluster TestUnshardedHelper runs on, and is set
// only in the process TestUnshardedFailsOnCluster starts.
const unshardedAddrs = "DSYNC_TEST_UNSHARDED_ADDRS"

// unsharded hides the adapter's Sharded method, as an adapter written
// without it would.
type unsharded struct{ backend.Backend }

// TestUnshardedFailsOnCluster checks that the suite catches an adapter
// that talks to a cluster but does not report backend.Sharded: its
// batched renewals span slots, the cluster refuses them, holds are lost.
// The suite runs in a child process, since a failing test cannot be
// observed from its parent.
func TestUnshardedFailsOnCluster(t *testing.T) {
	if os.Getenv(unshardedAddrs) != "" {
		t.Skip("in the child process")
	}
	cl := harness.NewCluster(t, 3)
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnshardedHelper$/^Mutex$/^ManyHoldsAcrossSlots$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), unshardedAddrs+"="+strings.Join(cl.Addrs(), ","))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed an adapter that hides Sharded on a cluster:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestUnshardedHelper/Mutex/ManyHoldsAcrossSlots", "ERROR dsync: lease renewal refused", "CROSSSLOT", "backend.Sharded"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("child output lacks %q:\n%s", want, out)
		}
	}
}

func TestUnshardedHelper(t *testing.T) {
	addrs := os.Getenv(unshardedAddrs)
	if addrs == "" {
		t.Skip("run by TestUnshardedFailsOnCluster")
	}
	conformance.Run(t, func(t *testing.T) backend.Backend {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
		b := goredis.New(c)
		t.Cleanup(func() { b.Close(); c.Close() })
		return unsharded{b}
	})
}
