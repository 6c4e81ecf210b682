package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/session"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// These tests run in a synctest bubble on an in-process miniredis whose
// TTLs follow the bubble's fake clock: the default 30s watchdog lease and
// the waiters' 5s heartbeat are exercised in milliseconds, exactly.

func TestFakeTimeDefaultWatchdogKeepsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		ctx := context.Background()
		m := mutex.New(b, "long")
		m.Lock()
		done := m.Done(ctx)
		_, calls0 := session.Stats(b)

		for i := 0; i < 30; i++ { // ten minutes, checked every 20s
			time.Sleep(20 * time.Second)
			ttl, err := m.TTL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ttl < 10*time.Second {
				t.Fatalf("after %v: remaining lease %v, below lease/3", time.Duration(i+1)*20*time.Second, ttl)
			}
		}
		select {
		case <-done:
			t.Fatal("hold lost during ten minutes of renewals")
		default:
		}
		_, calls := session.Stats(b)
		// One renewal every 10s, from the last one.
		if n := calls - calls0; n < 59 || n > 61 {
			t.Errorf("%d renewals in 10 minutes with a 30s lease, want 60", n)
		}
		m.Unlock()
		<-done
		// The scheduler retires with its last lease: nothing is left to
		// renew, and no goroutine is left to do it (synctest.Test would
		// report a goroutine left blocked in the bubble).
		if leases, _ := session.Stats(b); leases != 0 {
			t.Errorf("%d leases scheduled after Unlock", leases)
		}
	})
}

func TestFakeTimeCrashedHolderFreesAfterLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		crashed := fake.FakeBackend(t, srv)
		ctx := context.Background()
		holder := mutex.New(crashed, "crash")
		holder.Lock()
		start := time.Now()
		// The holder's process dies: its backend goes away without an
		// unlock, and nothing renews the lease any more.
		crashed.Close()
		<-holder.Done(ctx)

		waiter := mutex.New(fake.FakeBackend(t, srv), "crash")
		if err := waiter.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("waiter acquired %v after the crash, want exactly the 30s lease", d)
		}
		waiter.Unlock()
	})
}

func TestFakeTimeFixedLeaseExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		ctx := dsync.WithOwner(context.Background())
		m := mutex.New(b, "fixed", mutex.WithLease(45*time.Second))
		if err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		<-m.Done(ctx)
		// Done closes the expiry margin, 1% of the lease plus 2ms, before
		// the server's expiry.
		const margin = 450*time.Millisecond + 2*time.Millisecond
		if d := time.Since(start); d != 45*time.Second-margin {
			t.Errorf("Done fired after %v, want the 45s lease less the %v margin", d, margin)
		}
		time.Sleep(margin)
		if locked, _ := m.IsLocked(ctx); locked {
			t.Error("still locked on the server after the lease")
		}
		if err := m.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("unlock after expiry: %v, want ErrNotHeld", err)
		}
	})
}

func TestFakeTimeRenewalsFailUntilLeaseRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		ctx := context.Background()
		m := mutex.New(b, "failing")
		m.Lock()
		start := time.Now()
		srv.SetError("LOADING Redis is loading the dataset in memory")
		<-m.Done(ctx)
		if d := time.Since(start); d > 30*time.Second || d < 29*time.Second {
			t.Errorf("lost signal %v after renewals began failing, want when the 30s lease ran out", d)
		}
		srv.SetError("")
		m.Unlock() // lost: logged, no panic
	})
}

func TestFakeTimeDeadWaiterCostsAtMostAHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := mutex.New(fake.FakeBackend(t, srv), "dead")
		holder.Lock()

		// A waiter whose process dies while queued: its registration
		// stays on the server, and the release's wake-up goes to it.
		deadB := fake.FakeBackend(t, srv)
		deadCtx, kill := context.WithCancel(ctx)
		deadDone := make(chan struct{})
		go func() {
			defer close(deadDone)
			mutex.New(deadB, "dead").LockContext(deadCtx)
		}()
		synctest.Wait()
		deadB.Close() // dies before it could leave the queue
		kill()
		<-deadDone

		// The live waiter queues later, so the dead one is first in line.
		time.Sleep(time.Second)
		live := mutex.New(fake.FakeBackend(t, srv), "dead")
		acquired := make(chan time.Time)
		go func() {
			if err := live.LockContext(ctx); err != nil {
				t.Error(err)
			}
			acquired <- time.Now()
		}()
		synctest.Wait()
		released := time.Now()
		holder.Unlock()
		// The wake-up went to the dead waiter; the live one finds the
		// mutex free at its next heartbeat.
		if d := (<-acquired).Sub(released); d != 5*time.Second {
			t.Errorf("live waiter acquired %v after the release, want at its 5s heartbeat", d)
		}
		live.Unlock()
	})
}

func TestFakeTimeManyHeldLocks(t *testing.T) {
	testserver.Long(t, "2,000 holds in fake time, about 30 s under -race")
	const held = 2000
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		ctx := context.Background()
		before := runtime.NumGoroutine()
		ms := make([]*mutex.Mutex, held)
		for i := range ms {
			ms[i] = mutex.New(b, fmt.Sprint("held-", i))
			ms[i].Lock()
			if i%100 == 0 {
				time.Sleep(time.Second) // acquisitions spread over 20s
			}
		}
		synctest.Wait() // renewals in flight finish
		// At most the pool's 4 connections, two goroutines each in the
		// in-process server, the pub/sub connection that watches for a
		// reconnection (the adapter's reader, the hub's, and two in the
		// server), and nothing per lock.
		if g := runtime.NumGoroutine() - before; g > 15 {
			t.Errorf("%d goroutines for %d held locks", g, held)
		}
		_, calls0 := session.Stats(b)
		time.Sleep(5 * time.Minute)
		_, calls := session.Stats(b)
		perInterval := float64(calls-calls0) / 30 // 10s intervals
		synctest.Wait()
		t.Logf("%d held locks: %.1f renewal calls per 10s interval, %d goroutines", held, perInterval, runtime.NumGoroutine()-before)
		if perInterval > held/50 {
			t.Errorf("%.1f renewal calls per interval for %d locks, want at most %d", perInterval, held, held/50)
		}
		for _, m := range ms {
			select {
			case <-m.Done(ctx):
				t.Fatalf("%s lost", m.Name())
			default:
			}
			m.Unlock()
		}
	})
}
