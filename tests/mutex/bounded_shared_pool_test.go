package mutex_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// TestTryLockOverABoundedSharedPool: an application shares a pool that
// lends two connections at most and fails a borrow beyond (MaxActive 2,
// Wait false) with a Backend, and keeps one of them busy (a BLPOP). Since
// d224b08 the Backend sent a call beside another's round trip on a second
// connection over such a pool, which failed with "connection pool
// exhausted": TryLockContext reported it, and renewals failed. Goroutines
// each locking and unlocking a mutex of their own, and a hold that the
// watchdog keeps meanwhile, see no error and no loss.
func TestTryLockOverABoundedSharedPool(t *testing.T) {
	srv := testserver.Real(t)
	pool := srv.Pool()
	pool.MaxActive = 2
	b := bredigo.New(pool)
	defer pool.Close()
	defer b.Close()

	kept := mutex.New(b, uniqueName("kept"), mutex.WithWatchdog(time.Second), mutex.WithLogger(nil))
	kctx := dsync.WithOwner(context.Background())
	if err := kept.LockContext(kctx); err != nil {
		t.Fatal(err)
	}

	// The application's own use of the pool, until the goroutines are
	// done.
	defer occupyConnection(t, srv, pool)()

	const goroutines = 8
	var (
		wg        sync.WaitGroup
		pairs     atomic.Int64
		errs      atomic.Int64
		stopAfter = time.Now().Add(1500 * time.Millisecond)
	)
	report := func(format string, args ...any) {
		if errs.Add(1) <= 5 {
			t.Errorf(format, args...)
		}
	}
	for range goroutines {
		m := mutex.New(b, uniqueName("own"), mutex.WithLogger(nil))
		wg.Go(func() {
			for n := 0; time.Now().Before(stopAfter) && n < 5000; n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				ok, err := m.TryLockContext(ctx)
				switch {
				case err != nil:
					report("TryLockContext of a free mutex: %v", err)
				case !ok:
					report("TryLockContext of a free mutex: not acquired")
				default:
					if err := m.UnlockContext(ctx); err != nil {
						report("UnlockContext: %v", err)
					} else {
						pairs.Add(1)
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if n := errs.Load(); n > 0 {
		t.Errorf("%d errors in %d pairs", n, pairs.Load())
	}
	select {
	case <-kept.Done(kctx):
		t.Error("the hold kept by the watchdog was lost meanwhile")
	default:
	}
	if err := kept.UnlockContext(kctx); err != nil {
		t.Errorf("unlock of the kept hold: %v", err)
	}
}

// occupyConnection takes one of pool's connections for the application's
// own use, a BLPOP that blocks until the function it returns answers it,
// and returns once the connection is taken.
func occupyConnection(t *testing.T, srv *testserver.Server, pool *redis.Pool) (done func()) {
	t.Helper()
	busy, idle := make(chan struct{}), make(chan struct{})
	list := "nothing-" + dsync.NewID()
	go func() {
		defer close(idle)
		c := pool.Get()
		defer c.Close()
		close(busy)
		redis.DoWithTimeout(c, 20*time.Second, "BLPOP", list, 12)
	}()
	<-busy
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := srv.Do(ctx, "LPUSH", list, "done"); err != nil {
			t.Error(err)
		}
		<-idle
	}
}
