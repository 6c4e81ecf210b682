package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStandalone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := harness.Standalone(t)
	h := s.Hooks()
	before, err := h.ConnectionsReceived(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.FlushScripts(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := h.PubSubClients(ctx); err != nil || n != 0 {
		t.Fatalf("PubSubClients: %d, %v", n, err)
	}
	if after, err := h.ConnectionsReceived(ctx); err != nil || after != before {
		t.Fatalf("ConnectionsReceived counts the harness's own: %d then %d, %v", before, after, err)
	}
	if _, err := s.Node().Do(ctx, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Node().Do(ctx, "GET", "k"); err != nil || v != nil {
		t.Fatalf("after restart: %v, %v; want the data gone", v, err)
	}
}

func TestCluster(t *testing.T) {
	testserver.Long(t, "a Redis Cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	c := harness.NewCluster(t, 3)
	t.Logf("3 masters up in %v", time.Since(start))
	if len(c.Addrs()) != 3 {
		t.Fatalf("addrs %v", c.Addrs())
	}
	// A key lands on the node owning its slot; the others redirect.
	moved := 0
	for _, n := range c.Nodes() {
		if _, err := n.Do(ctx, "SET", "k", "v"); err != nil {
			if _, ok := err.(redis.Error); !ok {
				t.Fatal(err)
			}
			moved++
		}
	}
	if moved != 2 {
		t.Fatalf("%d of 3 nodes redirected a key, want 2", moved)
	}
	start = time.Now()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %v", time.Since(start))
	if n, err := c.Hooks().Subscribers(ctx, "nobody"); err != nil || n != 0 {
		t.Fatalf("Subscribers: %d, %v", n, err)
	}
}

func TestSentinel(t *testing.T) {
	testserver.Long(t, "a Sentinel set")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	s := harness.NewSentinel(t)
	t.Logf("primary, replica and sentinel up in %v", time.Since(start))
	old := s.Primary()
	if _, err := old.Do(ctx, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes()) != 2 {
		t.Fatalf("%d data nodes up, want 2", len(s.Nodes()))
	}
	start = time.Now()
	if err := s.KillPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover in %v", time.Since(start))
	if s.Primary() == old || len(s.Nodes()) != 1 {
		t.Fatal("the primary did not change")
	}
	if _, err := s.Primary().Do(ctx, "SET", "k2", "v"); err != nil {
		t.Fatalf("write to the new primary: %v", err)
	}
}
