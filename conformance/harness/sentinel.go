package harness

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/conformance"
)

// MasterName is the name under which Sentinel watches the primary.
const MasterName = "dsync"

// failoverTimeout bounds how long Sentinel may take to promote the
// replica after the primary is killed.
const failoverTimeout = 30 * time.Second

// Sentinel is a primary with one replica, watched by one Sentinel (quorum
// 1) that declares the primary down after 1s of silence.
type Sentinel struct {
	sentinel *Node

	mu      sync.Mutex
	primary *Node
	replica *Node
}

// StartSentinel starts a primary, a replica of it and a Sentinel watching
// them, and waits until the replica is in sync and Sentinel knows it. The
// caller stops them with Close.
func StartSentinel(ctx context.Context) (*Sentinel, error) {
	s := &Sentinel{}
	err := func() error {
		var err error
		// Either may become the primary; neither waits before a full sync.
		if s.primary, err = startNode(ctx, false, "", "--repl-diskless-sync-delay", "0"); err != nil {
			return err
		}
		if s.replica, err = startNode(ctx, false, "", "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", s.primary.port); err != nil {
			return err
		}
		if err := waitFor(ctx, startTimeout, "replica in sync", func() (bool, error) {
			info, err := s.replica.info(ctx, "replication")
			return err == nil && info["master_link_status"] == "up", err
		}); err != nil {
			return err
		}
		// Sentinel notices a down primary only after 5s without a
		// reply: a loaded test machine stalls a server for a second now
		// and then, which set to 1s made Sentinel fail over in the
		// middle of unrelated tests. KillPrimary asks for the failover.
		conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s 1\n"+
			"sentinel down-after-milliseconds %[1]s 5000\n"+
			"sentinel failover-timeout %[1]s 10000\n", MasterName, s.primary.port)
		if s.sentinel, err = startNode(ctx, true, conf, "--sentinel"); err != nil {
			return err
		}
		return waitFor(ctx, startTimeout, "sentinel knows the replica", func() (bool, error) {
			a, err := redis.Values(s.sentinel.Do(ctx, "SENTINEL", "REPLICAS", MasterName))
			return err == nil && len(a) == 1, err
		})
	}()
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// NewSentinel starts a Sentinel set for t, stopped when t ends. It skips t
// when redis-server is not on PATH (fails it under DSYNC_REQUIRE_REDIS=1).
func NewSentinel(t testing.TB) *Sentinel {
	t.Helper()
	skipUnavailable(t)
	s, err := StartSentinel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// SentinelAddrs returns the Sentinels' host:port, for a failover client.
func (s *Sentinel) SentinelAddrs() []string { return []string{s.sentinel.Addr()} }

// Primary returns the current primary.
func (s *Sentinel) Primary() *Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.primary
}

// Replica returns the current replica (after a failover, the old primary,
// which is down).
func (s *Sentinel) Replica() *Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replica
}

// Nodes returns the data nodes that are up.
func (s *Sentinel) Nodes() []*Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	var nodes []*Node
	for _, n := range []*Node{s.primary, s.replica} {
		if n != nil && n.Up() {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// KillPrimary kills the primary with SIGKILL, as a crash would, and waits
// until Sentinel has promoted the replica and it accepts writes. The old
// primary stays down. It asks Sentinel for the failover (SENTINEL
// FAILOVER) until one starts, rather than wait for Sentinel to find the
// primary down: a replica that cannot be promoted yet (asleep, say) is
// asked again every half second.
func (s *Sentinel) KillPrimary(ctx context.Context) error {
	s.mu.Lock()
	old, next := s.primary, s.replica
	s.mu.Unlock()
	old.Kill()
	var asked time.Time
	err := waitFor(ctx, failoverTimeout, "failover", func() (bool, error) {
		if time.Since(asked) > 500*time.Millisecond {
			asked = time.Now()
			s.sentinel.Do(ctx, "SENTINEL", "FAILOVER", MasterName) // INPROG once one runs
		}
		a, err := redis.Strings(s.sentinel.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName))
		if err != nil || len(a) != 2 || net.JoinHostPort(a[0], a[1]) != next.Addr() {
			return false, err
		}
		info, err := next.info(ctx, "replication")
		return err == nil && info["role"] == "master", err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.primary, s.replica = next, old
	s.mu.Unlock()
	return nil
}

// Hooks returns the conformance hooks, acting on the data nodes that are
// up. ConnectionsReceived counts the primary's only: a backend connects to
// nothing else, and the replica accepts short-lived connections of its
// own now and then. There is no Restart hook: a restarted primary would
// race Sentinel's failover; use KillPrimary in tests of its own. Declare
// it missing, or the suite's Restart case fails:
//
//	conformance.Run(t, newBackend, conformance.WithHooks(s.Hooks()), conformance.WithoutHooks("Restart"))
func (s *Sentinel) Hooks() conformance.Hooks {
	h := hooks(s.Nodes, nil)
	h.ConnectionsReceived = hooks(func() []*Node { return []*Node{s.Primary()} }, nil).ConnectionsReceived
	return h
}

// Close stops every process and removes their files. It is idempotent.
func (s *Sentinel) Close() {
	for _, n := range []*Node{s.sentinel, s.primary, s.replica} {
		if n != nil {
			n.close()
		}
	}
}
