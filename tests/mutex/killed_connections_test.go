package mutex_test

import (
	"context"
	"fmt"
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

// TestPipelinedLocksSurviveKilledConnections: goroutines share one backend
// value, so their calls share round trips (SETs, releases and scripts in
// one batch), while the server closes every client connection again and
// again: replies are lost after their calls ran. Every Lock and Unlock
// still succeeds (a SET or a release that ran is recognised by its retry),
// no two goroutines hold a mutex at once, and nothing is left held.
func TestPipelinedLocksSurviveKilledConnections(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := srv.NewBackend(t)
	prefix := uniqueName("killed")
	const goroutines, shared = 48, 4
	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		holders  [shared]atomic.Int32
		acquired atomic.Int64
		errs     atomic.Int64
	)
	report := func(format string, args ...any) {
		if errs.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	for g := range goroutines {
		wg.Go(func() {
			// Half the goroutines contend for a few shared mutexes, half
			// take names of their own (the service shape).
			i := g % shared
			name := fmt.Sprintf("%s-shared-%d", prefix, i)
			own := g%2 == 1
			if own {
				name = fmt.Sprintf("%s-own-%d", prefix, g)
			}
			m := mutex.New(b, name, mutex.WithLogger(nil))
			for n := 0; !stop.Load() && n < 100000; n++ {
				octx := ctx
				if n%2 == 0 {
					octx = dsync.WithOwner(ctx)
				}
				lctx, lcancel := context.WithTimeout(octx, 10*time.Second)
				err := m.LockContext(lctx)
				if err != nil {
					lcancel()
					if ctx.Err() == nil {
						report("goroutine %d: Lock %s: %v", g, name, err)
					}
					return
				}
				acquired.Add(1)
				if !own {
					if h := holders[i].Add(1); h != 1 {
						report("mutex %s held by %d goroutines at once", name, h)
					}
					holders[i].Add(-1)
				}
				err = m.UnlockContext(lctx)
				lcancel()
				if err != nil {
					report("goroutine %d: Unlock %s: %v", g, name, err)
					return
				}
			}
		})
	}
	kills := 0
	for range 15 {
		time.Sleep(40 * time.Millisecond)
		if _, err := srv.Do(ctx, "CLIENT", "KILL", "TYPE", "normal"); err != nil {
			t.Fatal(err)
		}
		kills++
	}
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d acquisitions across %d kills", acquired.Load(), kills)
	keys, err := redis.Strings(srv.Do(context.Background(), "KEYS", "dsync:mutex:{"+prefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ":fence") {
			continue
		}
		v, _ := redis.String(srv.Do(context.Background(), "GET", k))
		pttl, _ := redis.Int64(srv.Do(context.Background(), "PTTL", k))
		t.Errorf("key left after every lock was released: %s = %q (pttl %dms)", k, v, pttl)
	}
}
