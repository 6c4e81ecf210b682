package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
	"github.com/gomodule/redigo/redis"
)

// servers returns the real redis-server and the shared miniredis.
func servers(t *testing.T) map[string]func() backend.Backend {
	real, mini := testserver.Real(t), fake.Mini(t)
	return map[string]func() backend.Backend{
		"redis":     func() backend.Backend { return real.NewBackend(t) },
		"miniredis": func() backend.Backend { return mini.NewBackend(t) },
	}
}

// One owner acquiring and releasing a permit at a time from three
// goroutines, through two handles, against two other contenders, so that
// its permits are handed to it by releases (its own included), its hold
// ends and starts again, and grows and shrinks, over several watchdog
// leases: its count on the server is exact at every step, no release is
// refused, permits never exceed the capacity, and all come back.
func TestAdvSameOwnerTwoGoroutines(t *testing.T) {
	for kind, newBackend := range servers(t) {
		t.Run(kind, func(t *testing.T) {
			const capacity = 3
			dbgSrv := testserver.Real(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			name := "same-owner-" + dsync.NewID()[:8]
			open := func() *semaphore.Semaphore {
				return semaphore.New(newBackend(), name, capacity, semaphore.WithWatchdog(600*time.Millisecond), semaphore.WithLogger(nil))
			}
			o := dsync.WithOwner(ctx)
			var (
				held, mine  atomic.Int64 // permits held by all, by o
				over, loops atomic.Int64
				wg          sync.WaitGroup
			)
			stop := time.Now().Add(2 * time.Second)
			work := func(s *semaphore.Semaphore, ctx context.Context, owned bool) {
				for i := 0; i < 5000 && time.Now().Before(stop); i++ {
					if err := s.Acquire(ctx, 1); err != nil {
						t.Errorf("acquire: %v", err)
						return
					}
					if held.Add(1) > capacity {
						over.Add(1)
					}
					if owned {
						m := mine.Add(1)
						st, err := s.State(ctx)
						// The other goroutines of o may acquire or release
						// meanwhile: the count is m, or up to two off it.
						if err != nil || st.Permits < 1 || st.Permits > 3 || st.Permits < m-2 || st.Permits > m+2 {
							t.Errorf("owner's permits on the server %d (%v), %d acquired", st.Permits, err, m)
						}
						mine.Add(-1)
					}
					time.Sleep(time.Duration(rand.N(500)) * time.Microsecond)
					held.Add(-1)
					if err := s.Release(ctx, 1); err != nil {
						v, _ := redis.Strings(dbgSrv.Do(context.Background(), "HGETALL", "dsync:semaphore:{"+name+"}"))
						t.Errorf("release (owned %v): %v; the state on the server (redis only) %v", owned, err, v)
						return
					}
					loops.Add(1)
				}
			}
			// Two goroutines of o on handles of their own, and one more on
			// a handle shared with the first.
			mine1 := open()
			wg.Go(func() { work(mine1, o, true) })
			wg.Go(func() { work(mine1, o, true) })
			wg.Go(func() { work(open(), o, true) })
			wg.Go(func() { work(open(), ctx, false) })
			wg.Go(func() { work(open(), dsync.WithOwner(ctx), false) })
			wg.Wait()
			if n := over.Load(); n > 0 {
				t.Errorf("%d times more than %d permits held", n, capacity)
			}
			probe := open()
			st, err := probe.State(o)
			if err != nil || st.Held != 0 || st.Permits != 0 || st.Holders != 0 || st.Queued != 0 {
				t.Errorf("at the end: %+v, %v; want all free", st, err)
			}
			if err := probe.Release(o, 1); !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("a release more = %v, want ErrNotHeld", err)
			}
			select {
			case <-probe.Done(o):
			default:
				t.Error("the owner's Done open with nothing held")
			}
			t.Logf("%d acquisitions", loops.Load())
		})
	}
}
