package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeDeadWokenWaiterDelaysOthersBounded: in normal mode a release
// frees the mutex and wakes the head waiter: the release of a hold as long
// as the threshold leaves a marker, which keeps plain SETs out; a shorter
// one deletes the key. When that waiter's process died, no registered
// waiter takes the mutex until the next one's heartbeat, whose attempt
// hands it to the dead head (it is due by then) for the 2s hand-off lease.
// The waiter behind it gets the mutex within its heartbeat plus that
// lease, not the marker's 15s, and nothing is left behind.
func TestFakeTimeDeadWokenWaiterDelaysOthersBounded(t *testing.T) {
	for _, hold := range []time.Duration{mutex.DefaultHandoffAfter, 0} {
		t.Run("hold="+hold.String(), func(t *testing.T) { deadWokenWaiter(t, hold) })
	}
}

func deadWokenWaiter(t *testing.T, hold time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "deadwoken"
		key := "dsync:mutex:{" + name + "}"
		holder := mutex.New(fake.FakeBackend(t, srv), name)
		holder.Lock()
		if _, err := holder.Token(ctx); err != nil {
			t.Fatal(err)
		}
		markWaiting(t, srv, key)
		// A dead waiter at the head, which arrived just now, under the
		// hand-off threshold: the release wakes it rather than hand it the
		// mutex.
		now := time.Now()
		dead := "deadhub/deadop|2000|deadowner"
		srv.ZAdd(key+":queue", float64(now.UnixMilli()), dead)
		srv.ZAdd(key+":expiry", float64(now.Add(15*time.Second).UnixMilli()), dead)
		waiter := mutex.New(fake.FakeBackend(t, srv), name)
		got := queue(t, ctx, waiter)
		time.Sleep(hold)
		released := time.Now()
		holder.Unlock()
		if v, _ := srv.Get(key); v == "" && hold > 0 {
			t.Fatal("no marker after the release of a hold as long as the threshold in normal mode")
		} else if v != "" && hold == 0 {
			t.Fatalf("%q after the release of a short hold in normal mode; want the key deleted", v)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		d := time.Since(released)
		t.Logf("the waiter behind a dead woken waiter acquired %v after the release", d)
		if d > 7*time.Second+10*time.Millisecond {
			t.Errorf("the waiter behind a dead woken waiter acquired %v after the release; want within its 5s heartbeat plus the 2s hand-off lease", d)
		}
		waiter.Unlock()
		assertOnlyToken(t, srv, name)
	})
}
