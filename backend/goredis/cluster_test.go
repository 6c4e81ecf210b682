package goredis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/mutex"
)

// counting counts the calls a backend receives, passing on what it
// declares (Sharded, Batcher).
type counting struct {
	*goredis.Backend
	evals, batches atomic.Int64
}

func (c *counting) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.evals.Add(1)
	return c.Backend.Eval(ctx, s, keys, args...)
}

func (c *counting) EvalBatch(ctx context.Context, calls []backend.Call) ([]backend.Result, error) {
	c.batches.Add(1)
	return c.Backend.EvalBatch(ctx, calls)
}

// roundTrips counts the commands and pipelines go-redis sends to the
// nodes of a cluster: each is one round trip to one node.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestTenThousandHoldsOnCluster holds 10,000 mutexes spread over a
// 3-master cluster through one backend for three renewal intervals: none
// is lost, and their renewals cost at most 200 calls, and 200 round trips
// to nodes, per interval. The watchdog lease is 6s: a renewal round of
// all 10,000 holds, due every 2s, has 4s to land on a loaded 2-vCPU
// machine, where the test, three servers and the load share the CPUs;
// taking and releasing the holds may take minutes there.
func TestTenThousandHoldsOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const n, leaseD = 10000, 6 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := harness.NewCluster(t, 3)
	rt := &roundTrips{}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: 32})
	c.OnNewNode(func(node *redis.Client) { node.AddHook(rt) })
	defer c.Close()
	b := &counting{Backend: goredis.New(c)}
	defer b.Close()

	owner := dsync.WithOwner(ctx)
	locks := make([]*mutex.Mutex, n)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				locks[i] = mutex.New(b, fmt.Sprintf("hold%d", i), mutex.WithWatchdog(leaseD))
				if err := locks[i].LockContext(owner); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d holds taken in %v", n, time.Since(start))

	evals, batches, trips := b.evals.Load(), b.batches.Load(), rt.n.Load()
	const intervals = 3
	time.Sleep(intervals * leaseD / 3) // time is what is tested: renewal intervals
	evals, batches, trips = b.evals.Load()-evals, b.batches.Load()-batches, rt.n.Load()-trips
	perInterval := float64(evals+batches) / intervals
	tripsPerInterval := float64(trips) / intervals
	t.Logf("renewals over %d intervals: %d Evals, %d EvalBatch calls, %d round trips to nodes: %.1f calls and %.1f round trips per interval",
		intervals, evals, batches, trips, perInterval, tripsPerInterval)
	if perInterval > 200 || tripsPerInterval > 200 {
		t.Errorf("%.1f calls and %.1f round trips per renewal interval, want at most 200 each", perInterval, tripsPerInterval)
	}
	lost := 0
	for _, m := range locks {
		select {
		case <-m.Done(owner):
			lost++
		default:
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d holds lost over %d renewal intervals", lost, n, intervals)
	}
	probe := goredis.New(c)
	defer probe.Close()
	for i := 0; i < n; i += n / 100 {
		if ok, err := mutex.New(probe, fmt.Sprintf("hold%d", i)).IsLocked(ctx); err != nil || !ok {
			t.Fatalf("hold%d not on the server: %v, %v", i, ok, err)
		}
	}
	start = time.Now()
	for _, m := range locks {
		m.UnlockContext(owner)
	}
	t.Logf("%d holds released in %v", n, time.Since(start))
}

// BenchmarkUncontended measures one lock+unlock with no contention, on a
// standalone server and on a 3-master cluster, in the same run.
func BenchmarkUncontended(b *testing.B) {
	srv := harness.Standalone(b)
	cl := harness.NewCluster(b, 3)
	for _, tc := range []struct {
		name string
		c    redis.UniversalClient
	}{
		{"standalone", redis.NewClient(&redis.Options{Addr: srv.Addr()})},
		{"cluster", redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})},
	} {
		defer tc.c.Close()
		b.Run(tc.name, func(b *testing.B) {
			be := goredis.New(tc.c)
			defer be.Close()
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				m := mutex.New(be, fmt.Sprintf("bench%d", i%64))
				if err := m.LockContext(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.UnlockContext(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
