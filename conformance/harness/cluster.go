package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/conformance"
)

// clusterTimeout bounds how long a cluster may take to agree that it is
// up, after creation or a restart.
const clusterTimeout = 20 * time.Second

// Cluster is a Redis Cluster of masters without replicas, the 16384 slots
// split evenly between them.
type Cluster struct {
	masters []*Node
}

// StartCluster starts a cluster of n masters (n ≥ 1) and waits until every
// node reports it up. The caller stops it with Close.
func StartCluster(ctx context.Context, n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("harness: a cluster of %d masters", n)
	}
	c := &Cluster{}
	err := func() error {
		for i := 0; i < n; i++ {
			node, err := startNode(ctx, false, "",
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-port", "{busport}",
				"--cluster-node-timeout", "2000",
				"--cluster-require-full-coverage", "yes",
			)
			if err != nil {
				return err
			}
			c.masters = append(c.masters, node)
		}
		// Slots first, then introductions, from Go: no redis-cli needed.
		for i, node := range c.masters {
			lo, hi := i*16384/n, (i+1)*16384/n-1
			if _, err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
				return fmt.Errorf("harness: CLUSTER ADDSLOTSRANGE on %s: %w", node.Addr(), err)
			}
		}
		for _, node := range c.masters[1:] {
			bus, err := busPort(ctx, node)
			if err != nil {
				return err
			}
			if _, err := c.masters[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", node.port, bus); err != nil {
				return fmt.Errorf("harness: CLUSTER MEET %s: %w", node.Addr(), err)
			}
		}
		return c.waitUp(ctx)
	}()
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// NewCluster starts a cluster of n masters for t, stopped when t ends. It
// skips t when redis-server is not on PATH (fails it under
// DSYNC_REQUIRE_REDIS=1).
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	skipUnavailable(t)
	c, err := StartCluster(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func busPort(ctx context.Context, n *Node) (string, error) {
	v, err := redis.String(n.Do(ctx, "CONFIG", "GET", "cluster-port"))
	if err == nil {
		return v, nil
	}
	a, err := redis.Strings(n.Do(ctx, "CONFIG", "GET", "cluster-port"))
	if err != nil || len(a) != 2 {
		return "", fmt.Errorf("harness: cluster-port of %s: %v", n.Addr(), err)
	}
	return a[1], nil
}

// waitUp waits until every node sees the whole cluster up: all slots
// served, every node known.
func (c *Cluster) waitUp(ctx context.Context) error {
	return waitFor(ctx, clusterTimeout, "cluster up", func() (bool, error) {
		for _, n := range c.masters {
			s, err := redis.String(n.Do(ctx, "CLUSTER", "INFO"))
			if err != nil {
				return false, err
			}
			if !strings.Contains(s, "cluster_state:ok") ||
				!strings.Contains(s, "cluster_slots_ok:16384") ||
				!strings.Contains(s, "cluster_known_nodes:"+strconv.Itoa(len(c.masters))+"\r") {
				return false, nil
			}
		}
		return true, nil
	})
}

// Addrs returns the masters' host:port, a client's seed addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.masters))
	for i, n := range c.masters {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the masters.
func (c *Cluster) Nodes() []*Node { return c.masters }

// Restart restarts every node at once and waits until the cluster is up
// again. Data is lost; slots and node identities are kept.
func (c *Cluster) Restart(ctx context.Context) error {
	for _, n := range c.masters {
		n.Kill()
	}
	if err := onEach(c.masters, func(n *Node) error { return n.Start(ctx) }); err != nil {
		return err
	}
	return c.waitUp(ctx)
}

// Hooks returns every conformance hook, each acting on every node.
func (c *Cluster) Hooks() conformance.Hooks {
	h := hooks(c.Nodes, c.Restart)
	h.Masters = func(context.Context) (int, error) { return len(c.Nodes()), nil }
	return h
}

// Close stops every node and removes their files. It is idempotent.
func (c *Cluster) Close() {
	for _, n := range c.masters {
		n.close()
	}
}
