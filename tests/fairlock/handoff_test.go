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

// TestHandOffExpiredBeforeWakeUpIsNotTaken: holder A releases, handing the
// lock to the head waiter W on a 1s lease, but W's wake-up is held up (a
// server pause, a congested pub/sub path) past that lease. W's heartbeat
// attempt then finds the lock free with X at the head of the queue: it
// queues W again and replies without a token ({0, -1, '0'}). When the
// late wake-up arrives, W must not take the hold it carries, which
// expired before W's last attempt: X, next in turn, takes the lock, and W
// waits until X unlocks, then holds with a newer token. Nothing is left
// behind W's return: no phantom hold of a queued entry of W's blocks the
// lock after W unlocks.
func TestHandOffExpiredBeforeWakeUpIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "handoffexpired"
		a := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLogger(nil))
		// W's hand-off lease (1s) is shorter than its heartbeat (5s/3):
		// its next attempt after the hand-off comes once the hold has
		// expired.
		wb := fake.NewGated(t, fake.FakeBackend(t, srv))
		w := fairlock.New(wb, name, fairlock.WithWatchdog(time.Second), fairlock.WithLogger(nil))
		xb := fake.NewGated(t, fake.FakeBackend(t, srv))
		x := fairlock.New(xb, name, fairlock.WithLogger(nil))
		probe := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLogger(nil))
		wo, xo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)

		a.Lock()
		aToken, _ := a.Token(ctx)
		wGot := queueWaiter(t, wo, w) // at the head
		xGot := queueWaiter(t, xo, x) // behind W
		xb.HoldEvals()                // X cannot take the lock before W's retry
		wb.HoldDeliveries()           // W's wake-up is held up
		a.Unlock()                    // handed to W on a 1s lease
		handed, err := probe.State(ctx)
		if err != nil || handed.Token <= aToken || handed.TTL > time.Second {
			t.Fatalf("state after A's unlock = %+v, %v; want W's hold, token above %d, on a 1s lease", handed, err, aToken)
		}

		// W's heartbeat at 1.67s finds the lock free, X at the head: W is
		// queued again, and told no token.
		time.Sleep(1700 * time.Millisecond)
		synctest.Wait()
		if st, err := probe.State(ctx); err != nil || st.Locked || st.Queued != 2 {
			t.Fatalf("state after W's retry = %+v, %v; want free, X and W queued", st, err)
		}
		wb.OpenDeliveries() // the stale wake-up reaches W
		synctest.Wait()
		xb.OpenEvals() // X's attempt: its turn
		if err := <-xGot; err != nil {
			t.Fatalf("X: %v", err)
		}
		xToken, err := x.Token(xo)
		if err != nil || xToken <= handed.Token {
			t.Fatalf("X's token = %d, %v; want above the expired hand-off's %d", xToken, err, handed.Token)
		}
		synctest.Wait()
		wReturned := false
		select {
		case err := <-wGot:
			wReturned = true
			if err == nil {
				t.Errorf("W's LockContext returned nil while X holds the lock (token %d): W took the hand-off of token %d, which expired before W's last attempt", xToken, handed.Token)
			} else {
				t.Errorf("W's LockContext failed: %v", err)
			}
		default:
		}

		// W keeps waiting while X holds, through a heartbeat.
		time.Sleep(2 * time.Second)
		if !wReturned {
			select {
			case err := <-wGot:
				wReturned = true
				t.Errorf("W's LockContext returned %v while X holds the lock", err)
			default:
			}
		}
		if err := x.UnlockContext(xo); err != nil {
			t.Fatalf("X's unlock: %v", err)
		}
		if !wReturned {
			if err := <-wGot; err != nil {
				t.Fatalf("W after X's unlock: %v", err)
			}
			if tok, err := w.Token(wo); err != nil || tok <= xToken {
				t.Errorf("W's token = %d, %v; want above X's %d", tok, err, xToken)
			}
			if n, err := w.HoldCount(wo); err != nil || n != 1 {
				t.Errorf("W's hold count = %d, %v; want 1", n, err)
			}
			if st, err := probe.State(ctx); err != nil || st.Queued != 0 {
				t.Errorf("state while W holds = %+v, %v; want nobody queued", st, err)
			}
		}
		// W's unlock leaves the lock free, with nobody queued: the next
		// comer takes it at once.
		if err := w.UnlockContext(wo); err != nil {
			t.Errorf("W's unlock: %v", err)
		}
		if st, err := probe.State(ctx); err != nil || st.Locked || st.Queued != 0 {
			t.Errorf("state after W's unlock = %+v, %v; want free, nobody queued", st, err)
		}
		if ok, err := probe.TryLockContext(ctx); err != nil || !ok {
			t.Errorf("TryLock after W's unlock = %v, %v; want the lock", ok, err)
		} else {
			probe.Unlock()
		}
		time.Sleep(time.Minute)
	})
}
