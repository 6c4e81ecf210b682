package fairlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// The comment above each test describes the defect it pins; the test
// failed on ed32bcc, before the fix.

// queueWaiter starts LockContext on m with ctx in the background and returns
// once the waiter is asleep (queued on the server).
func queueWaiter(t *testing.T, ctx context.Context, m *fairlock.Mutex) <-chan error {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- m.LockContext(ctx) }()
	synctest.Wait()
	select {
	case err := <-got:
		t.Fatalf("LockContext returned at once: %v", err)
	default:
	}
	return got
}

// TestDeadHeadSkippedOnFixedLease: with a fixed lease (WithLease),
// a release hands the lock to the head of the queue on the full fixed
// lease (core.Handle.HandedLease). A head whose process died since its last heartbeat
// (its entry not yet expired) then blocks the queue for the whole lease,
// not "at most the waiter timeout" (DESIGN §4 fairlock, WithWaiterTimeout:
// "one whose process died is skipped at most d after its last beat").
func TestDeadHeadSkippedOnFixedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "fixeddead"
		const timeout = time.Second
		open := func() *fairlock.Mutex {
			return fairlock.New(fake.FakeBackend(t, srv), name,
				fairlock.WithLease(time.Minute), fairlock.WithWaiterTimeout(timeout), fairlock.WithLogger(nil))
		}
		holder := open()
		holder.Lock()
		db := fake.FakeBackend(t, srv)
		dead := fairlock.New(db, name, fairlock.WithLease(time.Minute), fairlock.WithWaiterTimeout(timeout), fairlock.WithLogger(nil))
		deadGot := queueWaiter(t, ctx, dead)
		live := open()
		liveGot := queueWaiter(t, ctx, live)
		db.Close() // the head's process dies: no heartbeat, no abandon
		if err := <-deadGot; err == nil {
			t.Fatal("the dead waiter acquired")
		}
		released := time.Now()
		holder.Unlock()
		lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		select {
		case err := <-liveGot:
			if err != nil {
				t.Fatal(err)
			}
		case <-lctx.Done():
			t.Fatal("live waiter never acquired")
		}
		if d := time.Since(released); d > timeout+time.Second {
			t.Errorf("the live waiter behind a dead head acquired %v after the release; want at most the waiter timeout %v (+ a heartbeat): the dead head was handed the lock on the full fixed lease", d, timeout)
		}
		live.Unlock()
	})
}

// TestQueueKeysExpireWhenAllDie: expire_at_least (lib.lua) leaves a key
// whose PTTL is -1 alone, and a sorted set that ZADD just created has PTTL
// -1: the queue and expiry keys never get a TTL. When the holder and a
// queued waiter both die, both keys stay on the server forever (DESIGN §3:
// keys vanish when the primitive is free, except documented TTL-bounded
// companions; queue.lua: "Both keys live as long as their longest-lived
// entry").
func TestQueueKeysExpireWhenAllDie(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "leak"
		hb, wb := fake.FakeBackend(t, srv), fake.FakeBackend(t, srv)
		holder := fairlock.New(hb, name, fairlock.WithLogger(nil))
		holder.Lock()
		waiter := fairlock.New(wb, name, fairlock.WithLogger(nil))
		got := queueWaiter(t, ctx, waiter)
		queue, expiry := "dsync:fairlock:{"+name+"}:queue", "dsync:fairlock:{"+name+"}:expiry"
		t.Logf("after a registration: TTL(queue) = %v, TTL(expiry) = %v", srv.TTL(queue), srv.TTL(expiry))
		// Both processes die.
		wb.Close()
		<-got
		hb.Close()
		time.Sleep(2 * time.Hour) // the hold's lease, the waiter timeout
		for _, k := range srv.Keys() {
			t.Errorf("key %s left behind 2h after every process died (TTL %v)", k, srv.TTL(k))
		}
	})
}
