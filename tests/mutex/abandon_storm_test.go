package mutex_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// TestGiveUpsAmongLocalWaitersLeaveNothing: goroutines of two backend
// values (two sessions, each queueing its goroutines locally) contend for
// one mutex with holds of a few ms, in both modes (waiters woken to try,
// and waiters handed the mutex once they waited past the threshold), and
// many give up their wait at a random moment: woken, handed the mutex, or
// queued behind a local hold. Exclusion holds, every Unlock succeeds, no
// acquisition that ended in an error holds the mutex, and once all are
// done nothing is left but the fence key.
func TestGiveUpsAmongLocalWaitersLeaveNothing(t *testing.T) {
	srv := testserver.Real(t)
	name := uniqueName("giveup")
	backends := [2]*mutex.Mutex{
		mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil)),
		mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil), mutex.WithHandoffAfter(time.Millisecond)),
	}
	const goroutines = 24
	var (
		wg        sync.WaitGroup
		holders   atomic.Int32
		acquired  atomic.Int64
		gaveUp    atomic.Int64
		errs      atomic.Int64
		stopAfter = time.Now().Add(2 * time.Second)
	)
	report := func(format string, args ...any) {
		if errs.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	for g := range goroutines {
		m := backends[g%2]
		wg.Go(func() {
			for n := 0; time.Now().Before(stopAfter) && n < 10000; n++ {
				ctx := context.Background()
				if g%3 == 0 {
					ctx = dsync.WithOwner(ctx)
				}
				wait := time.Duration(rand.IntN(8000)) * time.Microsecond
				lctx, cancel := context.WithTimeout(ctx, wait)
				err := m.LockContext(lctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						report("goroutine %d: Lock: %v", g, err)
						return
					}
					gaveUp.Add(1)
					continue
				}
				acquired.Add(1)
				if h := holders.Add(1); h != 1 {
					report("held by %d goroutines at once", h)
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				holders.Add(-1)
				if err := m.UnlockContext(ctx); err != nil {
					report("goroutine %d: Unlock: %v", g, err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d acquisitions, %d given up", acquired.Load(), gaveUp.Load())
	if acquired.Load() == 0 || gaveUp.Load() == 0 {
		t.Fatalf("%d acquisitions, %d given up: the test did not exercise both", acquired.Load(), gaveUp.Load())
	}
	// The clean-ups of the given-up acquisitions may still run in the
	// background, briefly.
	key := "dsync:mutex:{" + name + "}"
	deadline := time.Now().Add(5 * time.Second)
	for {
		keys, err := redis.Strings(srv.Do(context.Background(), "KEYS", key+"*"))
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, k := range keys {
			if !strings.HasSuffix(k, ":fence") {
				v, _ := redis.String(srv.Do(context.Background(), "GET", k))
				left = append(left, k+"="+v)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys left 5s after every acquisition ended: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
