package semaphore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// In fake time: the default 30s watchdog lease keeps an owner's permits for
// ten minutes, and a fixed 30s lease gives them back at 30s, to a waiter
// that acquires then, with the holder's Done closed.
func TestFakeTimeLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		o := dsync.WithOwner(ctx)
		kept := semaphore.New(fake.FakeBackend(t, srv), "leases", 3, semaphore.WithLogger(nil))
		if err := kept.Acquire(o, 2); err != nil {
			t.Fatal(err)
		}
		fixed := semaphore.New(fake.FakeBackend(t, srv), "leases", 3, semaphore.WithLease(30*time.Second), semaphore.WithLogger(nil))
		if err := fixed.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		acquired := time.Now()
		done := fixed.Done(ctx)
		w := semaphore.New(fake.FakeBackend(t, srv), "leases", 3, semaphore.WithLogger(nil))
		got := acquire(ctx, w, 1)
		queued(t, got)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(acquired); d < 30*time.Second || d > 30*time.Second+10*time.Millisecond {
			t.Errorf("the fixed-lease permit came back after %v; want 30s", d)
		}
		select {
		case <-done:
		default:
			t.Error("the fixed-lease holder's Done is open after its lease ended")
		}
		keptDone := kept.Done(o)
		time.Sleep(10 * time.Minute)
		select {
		case <-keptDone:
			t.Fatal("the watchdog-leased permits were lost")
		default:
		}
		if st, err := kept.State(o); err != nil || st.Permits != 2 || st.Held != 3 {
			t.Errorf("after 10 minutes: %+v, %v; want the owner's 2 and the waiter's 1", st, err)
		}
		if err := kept.Release(o, 2); err != nil {
			t.Fatal(err)
		}
		if err := w.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if k := fakeKeysLeft(srv); len(k) != 0 {
			t.Errorf("keys left: %v", k)
		}
	})
}
