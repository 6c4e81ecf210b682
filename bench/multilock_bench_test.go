package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// BenchmarkMultiLockRedLock compares multilock.RedLock with redsync's
// RedLock over the same 5 private redis-server processes, in one run:
//
//	go test -run XXX -bench MultiLockRedLock -benchtime 2000x ./bench
//
// Uncontended: one client's lock+unlock (ns/op). Contended8: 8 clients
// (goroutines, each with pools of its own) hold the lock 1ms each time;
// ns/op is the time per acquisition (1/throughput), with acq/s, and the
// p50 and p99 wait in µs. redsync runs with its defaults (32 tries, a
// 50-250ms random retry delay) and with a 1ms retry delay.
func BenchmarkMultiLockRedLock(b *testing.B) {
	if !harness.Available() {
		b.Skip("redis-server not on PATH")
	}
	var addrs []string
	for range 5 {
		s, err := harness.StartServer(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		addrs = append(addrs, s.Addr())
	}
	impls := []struct {
		name string
		new  func(name string) (redlockClient, func())
	}{
		{"dsync", func(name string) (redlockClient, func()) { return newMultiRedLock(addrs, name) }},
		{"redsync", func(name string) (redlockClient, func()) { return newRedsyncMulti(addrs, name) }},
		{"redsync-1ms", func(name string) (redlockClient, func()) {
			return newRedsyncMulti(addrs, name, redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1<<30))
		}},
	}
	for _, impl := range impls {
		b.Run("Uncontended/impl="+impl.name, func(b *testing.B) {
			c, stop := impl.new(dsync.NewID())
			defer stop()
			ctx := context.Background()
			for range 20 { // warm the pools
				must(b, c.lock(ctx), c.unlock(ctx))
			}
			b.ResetTimer()
			for range b.N {
				must(b, c.lock(ctx), c.unlock(ctx))
			}
		})
	}
	for _, impl := range impls {
		b.Run("Contended8/impl="+impl.name, func(b *testing.B) {
			const contenders, hold = 8, time.Millisecond
			name := dsync.NewID()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			clients := make([]redlockClient, contenders)
			for i := range clients {
				c, stop := impl.new(name)
				defer stop()
				must(b, c.lock(ctx), c.unlock(ctx))
				clients[i] = c
			}
			var (
				left  atomic.Int64
				mu    sync.Mutex
				waits []time.Duration
				wg    sync.WaitGroup
				errs  = make(chan error, contenders)
			)
			left.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			for _, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					defer func() { mu.Lock(); waits = append(waits, mine...); mu.Unlock() }()
					for left.Add(-1) >= 0 {
						t0 := time.Now()
						if err := c.lock(ctx); err != nil {
							errs <- err
							return
						}
						mine = append(mine, time.Since(t0))
						time.Sleep(hold)
						if err := c.unlock(ctx); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Error(err)
			}
			slices.Sort(waits)
			b.ReportMetric(float64(len(waits))/el.Seconds(), "acq/s")
			b.ReportMetric(float64(percentile(waits, 0.50).Microseconds()), "p50-wait-µs")
			b.ReportMetric(float64(percentile(waits, 0.99).Microseconds()), "p99-wait-µs")
		})
	}
}

func must(b *testing.B, errs ...error) {
	b.Helper()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}

type redlockClient struct {
	lock, unlock func(context.Context) error
}

func newMultiRedLock(addrs []string, name string) (redlockClient, func()) {
	var ms []dsync.Locker
	var stops []func()
	for _, a := range addrs {
		pool := redigoPool(a, &counter{})
		be := bredigo.New(pool)
		ms = append(ms, mutex.New(be, name))
		stops = append(stops, func() { be.Close(); pool.Close() })
	}
	l := multilock.RedLock(ms...)
	// Ownerless holds, as sync.Locker: the group remembers their owners.
	return redlockClient{lock: l.LockContext, unlock: l.UnlockContext}, func() {
		for _, f := range stops {
			f()
		}
	}
}

func newRedsyncMulti(addrs []string, name string, opts ...redsync.Option) (redlockClient, func()) {
	var pools []*redis.Pool
	var ps []rsredis.Pool
	for _, a := range addrs {
		p := redigoPool(a, &counter{})
		pools = append(pools, p)
		ps = append(ps, rsredigo.NewPool(p))
	}
	m := redsync.New(ps...).NewMutex(name, opts...)
	return redlockClient{
			lock: m.LockContext,
			unlock: func(ctx context.Context) error {
				_, err := m.UnlockContext(ctx)
				return err
			},
		}, func() {
			for _, p := range pools {
				p.Close()
			}
		}
}
