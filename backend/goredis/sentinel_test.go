package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/mutex"
)

const failoverLease = 2 * time.Second

func failoverBackend(t *testing.T, s *harness.Sentinel, opts ...goredis.Option) *goredis.Backend {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: harness.MasterName, SentinelAddrs: s.SentinelAddrs()})
	b := goredis.New(c, opts...)
	t.Cleanup(func() { b.Close(); c.Close() })
	return b
}

// cutReplica makes the replica miss what the primary writes next: it is
// put to sleep (DEBUG SLEEP, so it cannot reconnect), and the primary
// drops its replication link. It returns when both hold, and a channel
// closed when the replica wakes.
func cutReplica(t *testing.T, ctx context.Context, s *harness.Sentinel, sleep time.Duration) <-chan struct{} {
	t.Helper()
	awake := make(chan struct{})
	go func() {
		defer close(awake)
		s.Replica().Do(ctx, "DEBUG", "SLEEP", sleep.Seconds())
	}()
	// The replica is asleep once it stops answering.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := s.Replica().Do(pctx, "PING")
		cancel()
		if err != nil {
			break
		}
		if time.Now().After(deadline) || i > 1000 {
			t.Fatal("the replica kept answering")
		}
	}
	if _, err := s.Primary().Do(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatal(err)
	}
	return awake
}

// TestFailoverLosesUnreplicatedHold: a hold granted by the primary just
// before it crashed, and never replicated, is gone after Sentinel promotes
// the replica. The holder learns it (Done fires), another owner acquires
// on the new primary, and its fencing token is larger, so a resource that
// checks tokens refuses the old holder.
func TestFailoverLosesUnreplicatedHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := harness.NewSentinel(t)
	b := failoverBackend(t, s)
	m := mutex.New(b, "failover", mutex.WithWatchdog(failoverLease))
	owner := dsync.WithOwner(ctx)

	awake := cutReplica(t, ctx, s, 2*time.Second)
	if err := m.LockContext(owner); err != nil {
		t.Fatal(err)
	}
	t1, err := m.Token(owner)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.KillPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover in %v", time.Since(start))
	<-awake
	select {
	case <-m.Done(owner):
		t.Logf("Done fired %v after the crash", time.Since(start))
	case <-time.After(2 * failoverLease):
		t.Fatal("the hold was lost with the primary, and Done did not fire")
	}
	other := mutex.New(failoverBackend(t, s), "failover")
	octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
	defer ocancel()
	o := dsync.WithOwner(octx)
	if err := other.LockContext(o); err != nil {
		t.Fatalf("another owner on the new primary: %v", err)
	}
	t2, err := other.Token(o)
	if err != nil {
		t.Fatal(err)
	}
	if t2 <= t1 {
		t.Errorf("token after the failover %d, not above the lost hold's %d", t2, t1)
	}
	t.Logf("lost hold's token %d, new holder's %d", t1, t2)
	other.UnlockContext(o)
}

// TestFailoverWithReplicaAck: with WithReplicaAck(1, ...), an acquisition
// the replica has not acknowledged is refused rather than granted on the
// primary alone, and a hold that was acknowledged, with a lease longer
// than the failover takes, survives the primary's crash: Done does not
// fire, the new primary has it with the same token, other owners wait.
// With no replica left, every call fails with ErrNotReplicated.
func TestFailoverWithReplicaAck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := harness.NewSentinel(t)
	b := failoverBackend(t, s, goredis.WithReplicaAck(1, 200*time.Millisecond))
	owner := dsync.WithOwner(ctx)

	// While the replica is cut off, nothing is acknowledged.
	awake := cutReplica(t, ctx, s, time.Second)
	lctx, lcancel := context.WithTimeout(owner, 500*time.Millisecond)
	err := mutex.New(b, "early", mutex.WithWatchdog(failoverLease)).LockContext(lctx)
	lcancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock while no replica acknowledges: %v, want a deadline error", err)
	}
	t.Logf("lock while no replica acknowledges: %v", err)
	<-awake

	// Acknowledged holds survive the failover, if their lease outlasts
	// it: no renewal reaches the server until the replica is promoted.
	const lease = 3 * failoverLease
	m := mutex.New(b, "failover", mutex.WithWatchdog(lease))
	if err := m.LockContext(owner); err != nil {
		t.Fatal(err)
	}
	t1, _ := m.Token(owner)
	start := time.Now()
	if err := s.KillPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover in %v", time.Since(start))
	probe := failoverBackend(t, s)
	if ok, err := mutex.New(probe, "failover").IsLocked(ctx); err != nil || !ok {
		t.Fatalf("the acknowledged hold on the new primary: %v, %v", ok, err)
	}
	select {
	case <-m.Done(owner):
		t.Fatal("an acknowledged hold was lost in the failover")
	case <-time.After(lease / 2): // a renewal interval and more
	}
	if t2, err := m.Token(owner); err != nil || t2 != t1 {
		t.Errorf("token after the failover: %d, %v; want %d", t2, err, t1)
	}
	if ok, err := mutex.New(probe, "failover").TryLockContext(dsync.WithOwner(ctx)); ok || err != nil {
		t.Errorf("another owner acquired a held lock after the failover: %v, %v", ok, err)
	}
	// The new primary has no replica: nothing is acknowledged any more,
	// so the release fails, and the hold is left to expire.
	if err := m.UnlockContext(owner); !errors.Is(err, goredis.ErrNotReplicated) {
		t.Errorf("unlock on a primary without replicas: %v, want ErrNotReplicated", err)
	}
}
