package mutex_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// One lock key turned into a hash by someone else costs only its own hold:
// the batched renewal of the others on the same backend goes on.
func TestFakeTimePoisonedKeyCostsOnlyItsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		ctx := dsync.WithOwner(context.Background())
		const n = 10
		ms := make([]*mutex.Mutex, n)
		for i := range ms {
			ms[i] = mutex.New(b, fmt.Sprintf("poison:%d", i), mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
			if err := ms[i].LockContext(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// The first renewal comes at 1s: by then one key is a hash.
		srv.Del("dsync:mutex:{poison:0}")
		srv.HSet("dsync:mutex:{poison:0}", "f", "v")
		time.Sleep(10 * time.Second) // several renewal intervals
		select {
		case <-ms[0].Done(ctx):
		default:
			t.Error("the hold whose key became a hash is not reported lost")
		}
		for i := 1; i < n; i++ {
			select {
			case <-ms[i].Done(ctx):
				t.Errorf("hold %d lost along with the poisoned key's", i)
			default:
			}
			if err := ms[i].UnlockContext(ctx); err != nil {
				t.Errorf("unlock %d: %v", i, err)
			}
		}
	})
}
