package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
)

// slotNames returns n lock names whose keys fall in n different hash
// slots, spread over the whole slot range: on a cluster they live on every
// node.
func slotNames(k lockKind, p string, n int) []string {
	names := make([]string, 0, n)
	// The i-th name is the first whose slot falls in the i-th of n equal
	// bands of the slot range.
	for i := 0; len(names) < n && i < 1000*n; i++ {
		name := fmt.Sprintf("s%d", i)
		if int(keys.Slot(k.key(p, name)))*n/16384 == len(names) {
			names = append(names, name)
		}
	}
	return names
}

var infoClusterScript = backend.NewScript(`-- KEYS: none. Reply: INFO cluster.
return redis.call('INFO', 'cluster')`)

// skipUnlessCluster skips t unless b's server is a Redis Cluster node (as
// the server says, whatever b reports): the slot tests are about
// clusters, and cost seconds elsewhere.
func skipUnlessCluster(t *testing.T, ctx context.Context, b backend.Backend) {
	t.Helper()
	v, err := b.Eval(ctx, infoClusterScript, nil)
	if info, _ := v.(string); err != nil || !strings.Contains(info, "cluster_enabled:1") {
		t.Skip("the server is not a Redis Cluster node (INFO cluster)")
	}
}

// testManyHoldsAcrossSlots holds 200 locks whose keys are spread over every
// hash slot range, through one backend, for three watchdog renewal
// intervals. The scheduler renews many holds in one batched call; a
// backend over a cluster that does not report backend.Sharded gets batches
// whose keys span slots, which the cluster refuses (CROSSSLOT), and loses
// every hold here.
func (s *suite) testManyHoldsAcrossSlots(t *testing.T, ctx context.Context, k lockKind) {
	const n, leaseD = 200, 2 * time.Second
	p := prefix()
	b := s.newBackend(t)
	skipUnlessCluster(t, ctx, b)
	names := slotNames(k, p, n)
	locks := make([]exclusiveLock, len(names))
	owner := dsync.WithOwner(ctx)
	for i, name := range names {
		locks[i] = k.open(b, name, lockConfig{prefix: p, watchdog: leaseD})
		must(t, locks[i].LockContext(owner), "lock %s", name)
	}
	defer func() {
		for _, m := range locks {
			m.UnlockContext(owner)
		}
	}()
	// Three renewal intervals, and a third of a lease more: a hold not
	// renewed has expired by then.
	deadline := time.Now().Add(leaseD + leaseD/3)
	for i, m := range locks {
		select {
		case <-m.Done(owner):
			t.Fatalf("hold %d of %d lost while the watchdog renewed it (a cluster backend must report backend.Sharded)", i+1, len(locks))
		case <-time.After(time.Until(deadline)):
		}
	}
	probe := s.newBackend(t)
	lost := 0
	for i, name := range names {
		if locked, err := k.open(probe, name, lockConfig{prefix: p}).IsLocked(ctx); err != nil || !locked {
			lost++
			if lost == 1 {
				t.Errorf("hold %d (%s) not on the server after %v: %v, %v", i, name, leaseD+leaseD/3, locked, err)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d holds lost across three renewal intervals", lost, len(names))
	}
}

// testContentionAcrossSlots has goroutines on several backends, half of
// them as if in processes of their own, contend for 200 locks spread over
// every slot range: one holder per name at a time, every acquisition
// eventually granted, some holds outliving a watchdog renewal, and
// hand-offs through pub/sub.
func (s *suite) testContentionAcrossSlots(t *testing.T, ctx context.Context, k lockKind) {
	const (
		names      = 200
		backends   = 4
		perBackend = 8
		rounds     = 2000
		leaseD     = 600 * time.Millisecond
	)
	p := prefix()
	skipUnlessCluster(t, ctx, s.newBackend(t))
	ns := slotNames(k, p, names)
	inside := make([]atomic.Int32, len(ns))
	var overlap, next, renewed atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, backends*perBackend)
	for i := 0; i < backends; i++ {
		var b backend.Backend = s.newBackend(t)
		if i%2 == 1 {
			b = elsewhere{b}
		}
		for j := 0; j < perBackend; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(i), uint64(j)))
				for round := next.Add(1); round <= rounds; round = next.Add(1) {
					// A few names are hot, so that waiters queue and
					// are handed the lock.
					x := r.IntN(len(ns))
					if round%2 == 0 {
						x = r.IntN(4)
					}
					m := k.open(b, ns[x], lockConfig{prefix: p, watchdog: leaseD})
					if err := m.LockContext(ctx); err != nil {
						errs <- fmt.Errorf("lock %s: %w", ns[x], err)
						return
					}
					if inside[x].Add(1) != 1 {
						overlap.Add(1)
					}
					if round%400 == 0 {
						// Outlive a renewal interval.
						done := m.Done(ctx)
						select {
						case <-done:
							errs <- fmt.Errorf("hold of %s lost while held", ns[x])
							return
						case <-time.After(leaseD/3 + leaseD/6):
						}
						renewed.Add(1)
					}
					inside[x].Add(-1)
					if err := m.UnlockContext(ctx); err != nil {
						errs <- fmt.Errorf("unlock %s: %w", ns[x], err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d times two holders held one name", n)
	}
	t.Logf("%d acquisitions of %d names over %d backends, %d held across a renewal", rounds, len(ns), backends, renewed.Load())
}
