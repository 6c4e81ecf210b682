package mutex_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// stall makes every Eval hang until its ctx is done once set (a
// black-holed network between this process and the server).
type stall struct {
	backend.Backend
	on atomic.Bool
}

func (s *stall) Eval(ctx context.Context, sc *backend.Script, keys []string, args ...any) (any, error) {
	if s.on.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Backend.Eval(ctx, sc, keys, args...)
}

// One stuck watchdog renewal blocks the scheduler's only round, so a fixed
// lease that runs out meanwhile is not reported lost until the renewal's
// own deadline, long after the server freed the key.
func TestFakeTimeStuckRenewalDelaysNoLostSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := &stall{Backend: fake.FakeBackend(t, srv)}
		ctx := dsync.WithOwner(context.Background())
		wd := mutex.New(b, "wd")
		if err := wd.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second)
		fixed := mutex.New(b, "fixed", mutex.WithLease(5*time.Second))
		if err := fixed.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		b.on.Store(true) // renewal at t=10s hangs until its deadline (t=30s)
		<-fixed.Done(ctx)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("fixed 5s lease reported lost after %v; the server freed it at 5s", d)
		}
		b.on.Store(false)
		fixed.UnlockContext(ctx)
		time.Sleep(30 * time.Second) // the stuck renewal gives up
		wd.UnlockContext(ctx)
	})
}
