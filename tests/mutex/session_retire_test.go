package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/session"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeSessionOfAFailedTryRetires: a backend value whose only use
// was a TryLock that found the mutex held, or an Unlock of a mutex it did
// not hold, has its session retired once idle, as one that held and
// released does. Before, such a session kept no lease and subscribed no
// channel, so nothing ever told it it was idle: it stayed in the
// process's table of sessions, with its backend value, for good.
func TestFakeTimeSessionOfAFailedTryRetires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := mutex.New(fake.FakeBackend(t, srv), "session-retire")
		holder.Lock()
		defer holder.Unlock()

		tried := fake.FakeBackend(t, srv)
		if ok, err := mutex.New(tried, "session-retire").TryLockContext(ctx); ok || err != nil {
			t.Fatalf("TryLock of a held mutex: %v, %v; want false, nil", ok, err)
		}
		unlocked := fake.FakeBackend(t, srv)
		if err := mutex.New(unlocked, "session-retire").UnlockContext(dsync.WithOwner(ctx)); err == nil {
			t.Fatal("Unlock of a mutex not held succeeded")
		}
		time.Sleep(3 * lease.IdleRetire)
		synctest.Wait()
		if session.Lookup(tried) != nil {
			t.Error("the session of a failed TryLock is still there after three idle periods")
		}
		if session.Lookup(unlocked) != nil {
			t.Error("the session of a refused Unlock is still there after three idle periods")
		}
	})
}
