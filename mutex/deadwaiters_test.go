package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// crashWaiters starts n waiters on name in one process that wait long
// enough to register as starving, then dies without leaving the queue.
func crashWaiters(t *testing.T, srv *miniredis.Miniredis, name string, n int) {
	dead := testserver.FakeBackend(t, srv)
	ctx, kill := context.WithCancel(context.Background())
	done := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		go func() {
			mutex.New(dead, name).LockContext(ctx)
			done <- struct{}{}
		}()
	}
	time.Sleep(6 * time.Second) // a heartbeat: registered as starving
	synctest.Wait()
	dead.Close() // the abandon calls cannot reach the server
	kill()
	for i := 0; i < n; i++ {
		<-done
	}
}

func TestFakeTimeExpiredDeadWaitersDoNotHideLiveOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.Fake(t)
		holder := mutex.New(testserver.FakeBackend(t, srv), "x")
		holder.Lock()
		crashWaiters(t, srv, "x", 20)

		live := mutex.New(testserver.FakeBackend(t, srv), "x")
		acquired := make(chan time.Time)
		go func() {
			if err := live.LockContext(context.Background()); err != nil {
				t.Error(err)
			}
			acquired <- time.Now()
		}()
		time.Sleep(15*time.Second + 500*time.Millisecond) // dead entries expired
		synctest.Wait()
		released := time.Now()
		holder.Unlock()
		if d := (<-acquired).Sub(released); d > 100*time.Millisecond {
			t.Errorf("live waiter acquired %v after the release; it was not woken", d)
		}
		live.Unlock()
		if _, err := srv.ZMembers("dsync:mutex:{x}:waiters"); err == nil {
			t.Error("waiter set left behind")
		}
	})
}

func TestFakeTimeReservationForDeadWaiterLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.Fake(t)
		ctx := context.Background()
		holder := mutex.New(testserver.FakeBackend(t, srv), "y")
		holder.Lock()
		// The entry a starving waiter leaves when its process dies: it
		// expires in 15s and sorts first (see lib.lua).
		const starveOffset = 1 << 42
		expires := float64(time.Now().Add(15*time.Second).UnixMilli() - starveOffset)
		if _, err := srv.ZAdd("dsync:mutex:{y}:waiters", expires, "deadhub/deadwaiter"); err != nil {
			t.Fatal(err)
		}
		holder.Unlock() // reserved for the dead, starving waiter

		other := mutex.New(testserver.FakeBackend(t, srv), "y")
		if ok, err := other.TryLockContext(ctx); ok || err != nil {
			t.Fatalf("TryLock during the reservation: %v, %v; want false", ok, err)
		}
		if ok, err := other.ForceUnlock(ctx); ok || err != nil {
			t.Errorf("ForceUnlock of a reservation: %v, %v; want false, untouched", ok, err)
		}
		start := time.Now()
		if err := other.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 101*time.Millisecond {
			t.Errorf("acquired %v after the release; the 100ms reservation lapsed long before", d)
		}
		other.Unlock()
	})
}
