package fairlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// acquisitions records who held the lock, in order.
type acquisitions struct {
	mu    sync.Mutex
	names []string
}

// lockAndRecord starts LockContext on m in the background; once it holds,
// it records name in o, unlocks, and sends the error (nil) on the channel
// it returns.
func (o *acquisitions) lockAndRecord(ctx context.Context, m *fairlock.Mutex, name string) <-chan error {
	got := make(chan error, 1)
	go func() {
		if err := m.LockContext(ctx); err != nil {
			got <- err
			return
		}
		o.mu.Lock()
		o.names = append(o.names, name)
		o.mu.Unlock()
		got <- m.UnlockContext(ctx)
	}()
	return got
}

// await returns what c carries, or fails t if nothing comes within a
// minute of the bubble's clock.
func await(t *testing.T, c <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: nothing within a minute", what)
		return nil
	}
}

func (o *acquisitions) order() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.names...)
}

// newcomers are the two ways a fresh acquisition reaches the server: a
// plain SET NX first (a backend with backend.Setter), or the acquire
// script's fast path (one without).
var newcomers = []struct {
	name string
	wrap func(t *testing.T, b backend.Backend) backend.Backend
}{
	{"plain SET", func(t *testing.T, b backend.Backend) backend.Backend { return b }},
	{"script", func(t *testing.T, b backend.Backend) backend.Backend { return fake.NewGated(t, b) }},
}

// tryOut makes TryLockContext on m, which must fail: a live waiter is
// queued.
func tryOut(t *testing.T, ctx context.Context, m *fairlock.Mutex, when string) {
	t.Helper()
	if ok, err := m.TryLockContext(ctx); ok || err != nil {
		if ok {
			m.Unlock()
		}
		t.Fatalf("a newcomer's TryLock %s = %v, %v; want false: a live waiter is queued", when, ok, err)
	}
}

// A newcomer never takes the lock ahead of a live waiter, also once the
// hold it queued behind is gone without a release: TryLock fails, and
// Lock returns after the waiter's, whether the newcomer tries with a
// plain SET NX or through the script.
func TestNewcomerWaitsAfterHoldExpired(t *testing.T) {
	for _, nc := range newcomers {
		t.Run(nc.name+"/hold ran out", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "ranout"
				holder := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLease(time.Second), fairlock.WithLogger(nil))
				holder.Lock() // never unlocked: the hold runs out
				// The waiter's next attempt, due when the hold runs out, is
				// held up: the lock is free with a live waiter queued.
				wb := fake.NewGated(t, fake.FakeBackend(t, srv))
				w := fairlock.New(wb, name, fairlock.WithLogger(nil))
				var o acquisitions
				wGot := o.lockAndRecord(ctx, w, "waiter")
				synctest.Wait()
				wb.HoldEvals()
				time.Sleep(1100 * time.Millisecond)
				n := fairlock.New(nc.wrap(t, fake.FakeBackend(t, srv)), name, fairlock.WithLogger(nil))
				tryOut(t, ctx, n, "after the hold ran out")
				nGot := o.lockAndRecord(ctx, n, "newcomer")
				synctest.Wait()
				wb.OpenEvals()
				for _, c := range []<-chan error{wGot, nGot} {
					if err := await(t, c, "an acquisition"); err != nil {
						t.Fatal(err)
					}
				}
				if got := o.order(); len(got) != 2 || got[0] != "waiter" {
					t.Errorf("held in the order %v; want the waiter first", got)
				}
			})
		})
		t.Run(nc.name+"/handed to a dead waiter", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "handeddead"
				holder := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLogger(nil))
				holder.Lock()
				db := fake.FakeBackend(t, srv)
				dead := fairlock.New(db, name, fairlock.WithLogger(nil))
				deadGot := queueWaiter(t, ctx, dead)
				lb := fake.NewGated(t, fake.FakeBackend(t, srv))
				live := fairlock.New(lb, name, fairlock.WithLogger(nil))
				var o acquisitions
				liveGot := o.lockAndRecord(ctx, live, "live")
				synctest.Wait()
				// The live waiter's next attempt is held up.
				lb.HoldEvals()
				db.Close() // the head's process dies: no heartbeat, no abandon
				if err := await(t, deadGot, "the dead waiter's LockContext"); err == nil {
					t.Fatal("the dead waiter acquired")
				}
				// Handed to the dead head on the hand-off lease (2s), with
				// the live waiter behind it.
				holder.Unlock()
				// Past the hand-off lease.
				time.Sleep(2100 * time.Millisecond)
				n := fairlock.New(nc.wrap(t, fake.FakeBackend(t, srv)), name, fairlock.WithLogger(nil))
				tryOut(t, ctx, n, "after a hand-off to a dead waiter ran out")
				nGot := o.lockAndRecord(ctx, n, "newcomer")
				synctest.Wait()
				lb.OpenEvals()
				for _, c := range []<-chan error{liveGot, nGot} {
					if err := await(t, c, "an acquisition"); err != nil {
						t.Fatal(err)
					}
				}
				if got := o.order(); len(got) != 2 || got[0] != "live" {
					t.Errorf("held in the order %v; want the live waiter first", got)
				}
			})
		})
		t.Run(nc.name+"/free with a sleeping head", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "sleepinghead"
				holder := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLease(time.Second), fairlock.WithLogger(nil))
				holder.Lock()
				// The head's place lasts a minute; its attempts and wake-ups
				// are held up.
				wb := fake.NewGated(t, fake.FakeBackend(t, srv))
				w := fairlock.New(wb, name, fairlock.WithWaiterTimeout(time.Minute), fairlock.WithLogger(nil))
				var o acquisitions
				wGot := o.lockAndRecord(ctx, w, "head")
				synctest.Wait()
				wb.HoldEvals()
				wb.HoldDeliveries()
				time.Sleep(1100 * time.Millisecond)
				open := func() *fairlock.Mutex {
					return fairlock.New(nc.wrap(t, fake.FakeBackend(t, srv)), name, fairlock.WithLogger(nil))
				}
				// Free, the head asleep: each newcomer's script finds it so,
				// wakes the head (held up) and queues behind it; none takes it.
				n1, n2 := open(), open()
				tryOut(t, ctx, n1, "on a free lock with a sleeping head")
				n1Got := o.lockAndRecord(ctx, n1, "first newcomer")
				synctest.Wait()
				tryOut(t, ctx, n2, "after another newcomer found the head asleep")
				n2Got := o.lockAndRecord(ctx, n2, "second newcomer")
				synctest.Wait()
				// Well past the hold's lease and the newcomers' waiter
				// timeout (5s), the head still asleep.
				time.Sleep(15 * time.Second)
				tryOut(t, ctx, open(), "15s later")
				if got := o.order(); len(got) != 0 {
					t.Fatalf("held while the head sleeps: %v", got)
				}
				wb.OpenEvals()
				wb.OpenDeliveries()
				for _, c := range []<-chan error{wGot, n1Got, n2Got} {
					if err := await(t, c, "an acquisition"); err != nil {
						t.Fatal(err)
					}
				}
				if got, want := o.order(), []string{"head", "first newcomer", "second newcomer"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
					t.Errorf("held in the order %v; want %v", got, want)
				}
			})
		})
	}
}

// A watchdog hold whose renewals cannot reach the server past its lease,
// with a waiter queued behind it, is lost on the server too, although its
// key stays for the waiter's sake: Done closes, Unlock and Token report
// dsync.ErrNotHeld, State reports the lock free with the waiter queued,
// and the waiter takes it with a newer token.
func TestEndedHoldIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "ended"
		hb := fake.NewGated(t, fake.FakeBackend(t, srv))
		holder := fairlock.New(hb, name, fairlock.WithWatchdog(time.Second), fairlock.WithLogger(nil))
		ho := dsync.WithOwner(ctx)
		if err := holder.LockContext(ho); err != nil {
			t.Fatal(err)
		}
		token, err := holder.Token(ho)
		if err != nil {
			t.Fatal(err)
		}
		wb := fake.NewGated(t, fake.FakeBackend(t, srv))
		w := fairlock.New(wb, name, fairlock.WithLogger(nil))
		wo := dsync.WithOwner(ctx)
		wGot := queueWaiter(t, wo, w)
		hb.HoldEvals() // no renewal reaches the server
		wb.HoldEvals() // the waiter's attempt when the hold runs out is held up
		time.Sleep(1500 * time.Millisecond)
		select {
		case <-holder.Done(ho):
		default:
			t.Error("Done is open past the lease with no renewal")
		}
		probe := fairlock.New(fake.FakeBackend(t, srv), name, fairlock.WithLogger(nil))
		st, err := probe.State(ctx)
		if err != nil || st.Locked || st.Holder != "" || st.TTL != 0 || st.Queued != 1 || st.Token != token {
			t.Errorf("State past the hold's lease = %+v, %v; want free, TTL 0, 1 queued, the ended hold's token %d", st, err, token)
		}
		if _, err := holder.Token(ho); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("Token of the ended hold: %v; want ErrNotHeld", err)
		}
		if err := holder.UnlockContext(ho); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("Unlock of the ended hold: %v; want ErrNotHeld", err)
		}
		hb.OpenEvals()
		wb.OpenEvals()
		if err := await(t, wGot, "the waiter's LockContext"); err != nil {
			t.Fatal(err)
		}
		if wt, err := w.Token(wo); err != nil || wt <= token {
			t.Errorf("the waiter's token = %d, %v; want above the ended hold's %d", wt, err, token)
		}
		if err := w.UnlockContext(wo); err != nil {
			t.Error(err)
		}
		if keys := srv.Keys(); len(keys) != 1 || keys[0] != "dsync:fairlock:{"+name+"}:fence" {
			t.Errorf("keys left after the last release: %v; want the fence key only", keys)
		}
	})
}
