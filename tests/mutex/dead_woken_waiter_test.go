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
// frees the mutex with a marker, which keeps plain SETs out, and wakes the
// head waiter; when that waiter's process died, nobody takes the mutex
// until the next waiter's heartbeat, whose attempt hands it to the dead
// head (it has waited past the threshold by then) for the 2s hand-off
// lease. The waiter behind it gets the mutex within its heartbeat plus
// that lease, not the marker's 15s, and nothing is left behind.
func TestFakeTimeDeadWokenWaiterDelaysOthersBounded(t *testing.T) {
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
		released := time.Now()
		holder.Unlock()
		if v, _ := srv.Get(key); v == "" {
			t.Fatal("no marker after a release in normal mode")
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
