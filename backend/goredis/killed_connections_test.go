package goredis_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/mutex"
)

// TestPipelinedLocksSurviveKilledConnections: goroutines share one backend
// value over go-redis, so their calls share round trips, while the server
// closes every client connection again and again: replies are lost after
// their calls ran. Every Lock and Unlock still succeeds, no two
// goroutines hold a mutex at once, and nothing is left held.
func TestPipelinedLocksSurviveKilledConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := harness.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	b := goredis.New(c)
	defer b.Close()
	prefix := "killed-" + dsync.NewID()[:8]
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
	for range 15 {
		time.Sleep(40 * time.Millisecond)
		if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Err(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d acquisitions across 15 kills", acquired.Load())
	keys, err := admin.Keys(context.Background(), "dsync:mutex:{"+prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasSuffix(k, ":fence") {
			v, _ := admin.Get(context.Background(), k).Result()
			t.Errorf("key left after every lock was released: %s = %q", k, v)
		}
	}
}
