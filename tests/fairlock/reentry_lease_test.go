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

// The comment above each test describes the defect it pins; the test
// failed on ed32bcc, before the fix.

// TestReentryDuringHandOffLease: the lock core's Lease.Extend
// (shared with mutex) extends the client's lease by its own TTL on a
// re-entry, whatever expiry the server kept. A hold handed to the head of
// the queue starts on a 2s lease; the same owner re-enters through a
// handle with a 1s lease, which leaves the server's expiry alone
// (store_extending); the client moves its next renewal to 10s. The hold
// expires on the server at 2s and another owner takes the lock while the
// first owner's Done is open, with no failure anywhere.
func TestReentryDuringHandOffLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "handreenter"
		b := fake.FakeBackend(t, srv)
		m1 := fairlock.New(b, name, fairlock.WithLogger(nil))                                  // 30s watchdog, 2s hand-off
		m2 := fairlock.New(b, name, fairlock.WithLease(time.Second), fairlock.WithLogger(nil)) // 1s fixed
		holder := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLogger(nil))
		x := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		holder.Lock()
		got := queueWaiter(t, o, m1)
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
