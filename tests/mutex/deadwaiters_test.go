package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// crashWaiters starts n waiters on name in one process that register and
// heartbeat once, then dies without leaving the queue.
func crashWaiters(t *testing.T, srv *miniredis.Miniredis, name string, n int) {
	dead := fake.FakeBackend(t, srv)
	ctx, kill := context.WithCancel(context.Background())
	done := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		go func() {
			mutex.New(dead, name).LockContext(ctx)
			done <- struct{}{}
		}()
	}
	time.Sleep(6 * time.Second) // registered, and refreshed by a heartbeat
	synctest.Wait()
	dead.Close() // the abandon calls cannot reach the server
	kill()
	for i := 0; i < n; i++ {
		<-done
	}
}

func TestFakeTimeExpiredDeadWaitersDoNotHideLiveOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		holder := mutex.New(fake.FakeBackend(t, srv), "x")
		holder.Lock()
		crashWaiters(t, srv, "x", 20)

		live := mutex.New(fake.FakeBackend(t, srv), "x")
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
