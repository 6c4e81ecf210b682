package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeWokenHeadComesBackBeforeAnUnexpiringHoldEnds: a head woken
// by the release of a short hold finds the releaser's next hold, which
// it leaves unflagged until it is due. That hold's key has no expiry (not
// one dsync set), so its remaining lease is unknown: the head must still
// come back when it is due and flag it, so that its release hands the
// mutex over, rather than sleep until its 5s heartbeat.
func TestFakeTimeWokenHeadComesBackBeforeAnUnexpiringHoldEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "unexpiring"
		key := "dsync:mutex:{" + name + "}"
		hb := fake.FakeBackend(t, srv)
		holder := mutex.New(hb, name)
		holder.Lock()

		// The head's attempts take a little longer than the holder's, so
		// that the holder's next Lock gets there first.
		wb := &slowed{Backend: fake.FakeBackend(t, srv)}
		waiter := mutex.New(wb, name)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got := queue(t, wctx, waiter)
		wb.delay.Store(int64(200 * time.Microsecond))

		woken := time.Now()
		holder.Unlock() // a short hold: the key deleted, the head woken
		holder.Lock()   // a plain SET, before the head's attempt
		persist := backend.NewScript("return redis.call('PERSIST', KEYS[1])")
		if n, err := hb.Eval(ctx, persist, []string{key}); err != nil || n != int64(1) {
			t.Fatalf("PERSIST = %v, %v", n, err)
		}
		time.Sleep(20 * time.Millisecond) // past the head's 3ms
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		d := time.Since(woken)
		t.Logf("the woken head acquired %v after its wake-up", d)
		if d > 25*time.Millisecond {
			t.Errorf("the woken head acquired %v after its wake-up; want at the holder's release, 20ms after", d)
		}
		waiter.Unlock()
	})
}
