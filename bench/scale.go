package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/session"
	"github.com/dsyncgo/dsync/mutex"
)

// WaitersResult is what ManyWaiters measured.
type WaitersResult struct {
	Waiters     int
	Acquired    int64
	PubSubConns int           // on the server while all were waiting
	Elapsed     time.Duration // from the first release to the last acquisition
	ServerCalls int64
	Commands    int64
}

func dsyncBackend(addr string, c *counter) (*redis.Pool, *bredigo.Backend) {
	pool := redigoPool(addr, c)
	pool.MaxActive = 128 // a service's pool is bounded; waiters queue for it
	pool.Wait = true
	return pool, bredigo.New(pool)
}

// ManyWaiters has n goroutines of one process (one backend) wait on one
// mutex held by another process, then releases it and waits until every
// waiter has acquired and released in turn.
func ManyWaiters(ctx context.Context, addr string, n int) (WaitersResult, error) {
	lockName := name("waiters")
	var c counter
	hpool, holderB := dsyncBackend(addr, &c)
	defer hpool.Close()
	defer holderB.Close()
	pool, b := dsyncBackend(addr, &c)
	defer pool.Close()
	defer b.Close()

	holder := mutex.New(holderB, lockName)
	if err := holder.LockContext(ctx); err != nil {
		return WaitersResult{}, err
	}
	var (
		acquired atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := mutex.New(b, lockName)
			if err := m.LockContext(ctx); err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			acquired.Add(1)
			if err := m.UnlockContext(ctx); err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		}()
	}
	// Wait until every waiter is registered on the server.
	ad := admin{addr}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		st, err := holder.State(ctx)
		if err != nil {
			return WaitersResult{}, err
		}
		if card := st.Waiters; card >= n {
			break
		} else if time.Now().After(deadline) {
			return WaitersResult{}, fmt.Errorf("only %d of %d waiters queued after 2m", card, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := WaitersResult{Waiters: n, PubSubConns: ad.pubsubConns()}
	m, err := startMeter(ad, &c)
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := holder.UnlockContext(ctx); err != nil {
		return r, err
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.Acquired = acquired.Load()
	r.Commands, _, r.ServerCalls, err = m.stop()
	return r, errors.Join(firstErr, err)
}

// settledGoroutines returns the number of goroutines once it has stopped
// falling for 50ms, or after limit: the goroutines of a scenario before
// (10,000 waiters, say) may still be ending, and counting them as the
// baseline would hide the goroutines that holding costs.
func settledGoroutines(limit time.Duration) int {
	n := runtime.NumGoroutine()
	for end, still := time.Now().Add(limit), 0; still < 5 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		if m := runtime.NumGoroutine(); m < n {
			n, still = m, 0
		} else {
			still++
		}
	}
	return n
}

// HeldResult is what ManyHeld measured.
type HeldResult struct {
	Held                int
	GoroutinesIdle      int // in the process before any lock was taken
	GoroutinesHeld      int // most seen while holding them all, renewals included
	RenewalsPerInterval float64
	Interval            time.Duration
	Lost                int
}

// ManyHeld takes n locks on one backend with a watchdog lease of leaseD,
// holds them for intervals renewal intervals, and reports the goroutines and
// renewal calls that cost.
func ManyHeld(ctx context.Context, addr string, n int, leaseD time.Duration, intervals int) (HeldResult, error) {
	var c counter
	pool, b := dsyncBackend(addr, &c)
	defer pool.Close()
	defer b.Close()
	r := HeldResult{Held: n, Interval: leaseD / 3, GoroutinesIdle: settledGoroutines(2 * time.Second)}
	prefix := name("held")
	ms := make([]*mutex.Mutex, n)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 64 {
				ms[i] = mutex.New(b, fmt.Sprintf("%s:%d", prefix, i), mutex.WithWatchdog(leaseD))
				if err := ms[i].LockContext(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	_, calls0 := session.Stats(backend.Backend(b))
	for end := time.Now().Add(time.Duration(intervals) * r.Interval); time.Now().Before(end); {
		r.GoroutinesHeld = max(r.GoroutinesHeld, runtime.NumGoroutine())
		time.Sleep(10 * time.Millisecond)
	}
	_, calls1 := session.Stats(backend.Backend(b))
	r.RenewalsPerInterval = float64(calls1-calls0) / float64(intervals)
	for _, m := range ms {
		select {
		case <-m.Done(ctx):
			r.Lost++
		default:
		}
		m.UnlockContext(ctx)
	}
	return r, nil
}
