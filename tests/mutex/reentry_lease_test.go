package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Same owner re-enters through a handle with a shorter fixed lease: the
// server key now expires in 1s, but the local lease (watchdog, 30s) keeps
// its deadline and next renewal in 10s. Another process takes the mutex
// while the holder's Done is still open.
func TestFakeTimeShorterLeaseReentryKeepsLongerExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		ctx := dsync.WithOwner(context.Background())
		long := mutex.New(b, "mix")
		short := mutex.New(b, "mix", mutex.WithLease(time.Second))
		if err := long.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := short.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		other := mutex.New(fake.FakeBackend(t, srv), "mix")
		ok, err := other.TryLockContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-long.Done(ctx):
		default:
			if ok {
				t.Errorf("another owner acquired while the holder's Done is still open (holder thinks it holds 2)")
			}
		}
		if ok {
			other.Unlock()
		}
		time.Sleep(time.Minute)
	})
}
