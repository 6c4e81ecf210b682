package fairlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Adversarial tests: each fails on ed32bcc for the defect named above it.

// advQueue starts LockContext on m with ctx in the background and returns
// once the waiter is asleep (queued on the server).
func advQueue(t *testing.T, ctx context.Context, m *fairlock.Mutex) <-chan error {
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

// TestAdvFixedLeaseDeadWaiterHoldsQueue: with a fixed lease (WithLease),
// a release hands the lock to the head of the queue on the full fixed
// lease (core.Handle.HandedLease). A head whose process died since its last heartbeat
// (its entry not yet expired) then blocks the queue for the whole lease,
// not "at most the waiter timeout" (DESIGN §4 fairlock, WithWaiterTimeout:
// "one whose process died is skipped at most d after its last beat").
func TestAdvFixedLeaseDeadWaiterHoldsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advfixeddead"
		const timeout = time.Second
		open := func() *fairlock.Mutex {
			return fairlock.New(fake.FakeBackend(t, srv), name,
				fairlock.WithLease(time.Minute), fairlock.WithWaiterTimeout(timeout), fairlock.WithLogger(nil))
		}
		holder := open()
		holder.Lock()
		db := fake.FakeBackend(t, srv)
		dead := fairlock.New(db, name, fairlock.WithLease(time.Minute), fairlock.WithWaiterTimeout(timeout), fairlock.WithLogger(nil))
		deadGot := advQueue(t, ctx, dead)
		live := open()
		liveGot := advQueue(t, ctx, live)
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

// TestAdvQueueKeysNeverExpire: expire_at_least (lib.lua) leaves a key
// whose PTTL is -1 alone, and a sorted set that ZADD just created has PTTL
// -1: the queue and expiry keys never get a TTL. When the holder and a
// queued waiter both die, both keys stay on the server forever (DESIGN §3:
// keys vanish when the primitive is free, except documented TTL-bounded
// companions; queue.lua: "Both keys live as long as their longest-lived
// entry").
func TestAdvQueueKeysNeverExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advleak"
		hb, wb := fake.FakeBackend(t, srv), fake.FakeBackend(t, srv)
		holder := fairlock.New(hb, name, fairlock.WithLogger(nil))
		holder.Lock()
		waiter := fairlock.New(wb, name, fairlock.WithLogger(nil))
		got := advQueue(t, ctx, waiter)
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

// TestAdvReentryDuringHandoffLeaseNoFailure: the lock core's Lease.Extend
// (shared with mutex) extends the client's lease by its own TTL on a
// re-entry, whatever expiry the server kept. A hold handed to the head of
// the queue starts on a 2s lease; the same owner re-enters through a
// handle with a 1s lease, which leaves the server's expiry alone
// (store_extending); the client moves its next renewal to 10s. The hold
// expires on the server at 2s and another owner takes the lock while the
// first owner's Done is open, with no failure anywhere.
func TestAdvReentryDuringHandoffLeaseNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advhandreenter"
		b := fake.FakeBackend(t, srv)
		m1 := fairlock.New(b, name, fairlock.WithLogger(nil))                                  // 30s watchdog, 2s hand-off
		m2 := fairlock.New(b, name, fairlock.WithLease(time.Second), fairlock.WithLogger(nil)) // 1s fixed
		holder := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLogger(nil))
		x := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		holder.Lock()
		got := advQueue(t, o, m1)
		holder.Unlock() // handed to o on a 2s lease
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := m2.LockContext(o); err != nil { // re-entry
			t.Fatal(err)
		}
		done := m1.Done(o)
		// Whenever another owner gets the lock, o's Done must have fired
		// before. With the watchdog renewing o's hold, nobody gets it.
		xHolds := false
		for time.Since(start) <= time.Minute && !xHolds {
			ok, err := x.TryLockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if xHolds = ok; ok {
				select {
				case <-done:
				default:
					t.Errorf("another owner took the lock %v after o's re-entry, with no failure anywhere, while o's Done is open",
						time.Since(start))
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !xHolds {
			for range 2 {
				if err := m1.UnlockContext(o); err != nil {
					t.Errorf("o's unlock after a minute of holding: %v", err)
				}
			}
			x.Lock()
		}
		x.Unlock()
		time.Sleep(time.Minute)
	})
}
