package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// One key of a busy semaphore vanishes (deleted, or evicted by maxmemory:
// eviction takes keys one at a time): no permit is lost for good (issue
// 26, defect 3). Capacity 3, owner A holds 2 on a watchdog lease (alone,
// in the single form, or beside another owner's hold, given back since,
// in the shared form, which has holders); the key is deleted. A is told (Done, within the lease), and while another owner
// acquires and releases 1 permit in a loop, the semaphore comes back to
// no permit held, and Acquire(3) on the idle semaphore succeeds within a
// lease.
func TestNoPermitLostWhenAKeyVanishes(t *testing.T) {
	real, mini := testserver.Real(t), fake.Mini(t)
	servers := map[string]struct {
		open func(name string, opts ...semaphore.Option) *semaphore.Semaphore
		do   func(ctx context.Context, cmd string, args ...any) (any, error)
	}{
		"redis": {
			open: func(name string, opts ...semaphore.Option) *semaphore.Semaphore {
				return semaphore.New(real.NewBackend(t), name, 3, opts...)
			},
			do: real.Do,
		},
		"miniredis": {
			open: func(name string, opts ...semaphore.Option) *semaphore.Semaphore {
				return semaphore.New(mini.NewBackend(t), name, 3, opts...)
			},
			do: func(ctx context.Context, cmd string, args ...any) (any, error) {
				c, err := redis.DialContext(ctx, "tcp", mini.Addr())
				if err != nil {
					return nil, err
				}
				defer c.Close()
				return redis.DoContext(c, ctx, cmd, args...)
			},
		},
	}
	for kind, srv := range servers {
		for _, suffix := range []string{":holders", ""} {
			t.Run(kind+"/"+"key"+suffix, func(t *testing.T) {
				const lease = 600 * time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				name := "vanish-" + dsync.NewID()[:8]
				a := srv.open(name, semaphore.WithWatchdog(lease), semaphore.WithLogger(nil))
				b := srv.open(name, semaphore.WithWatchdog(lease), semaphore.WithLogger(nil))
				ao := dsync.WithOwner(ctx)
				if err := a.Acquire(ao, 2); err != nil {
					t.Fatal(err)
				}
				if suffix == ":holders" {
					// A lone holder's state is one key: another owner's
					// permit, taken and given back, makes it the shared
					// form, which has holders.
					co := dsync.WithOwner(ctx)
					if err := b.Acquire(co, 1); err != nil {
						t.Fatal(err)
					}
					if err := b.Release(co, 1); err != nil {
						t.Fatal(err)
					}
				}
				key := "dsync:semaphore:{" + name + "}" + suffix
				if n, err := redis.Int(srv.do(ctx, "DEL", key)); err != nil || n != 1 {
					t.Fatalf("DEL %s = %d, %v", key, n, err)
				}
				deleted := time.Now()
				select {
				case <-a.Done(ao):
				case <-time.After(lease):
					t.Fatalf("A's Done still open %v after %s was deleted", lease, key)
				}
				told := time.Since(deleted)
				// Another owner keeps the semaphore busy for two leases.
				bo := dsync.WithOwner(ctx)
				rounds := 0
				for stop := time.Now().Add(2 * lease); rounds < 1000 && time.Now().Before(stop); rounds++ {
					if err := b.Acquire(bo, 1); err != nil {
						t.Fatalf("round %d: %v", rounds, err)
					}
					if err := b.Release(bo, 1); err != nil {
						t.Fatalf("round %d: %v", rounds, err)
					}
				}
				st, err := b.State(ctx)
				if err != nil {
					t.Fatal(err)
				}
				actx, acancel := context.WithTimeout(ctx, lease)
				start := time.Now()
				err = b.Acquire(actx, 3)
				acancel()
				t.Logf("%s deleted while A held 2 of 3: A told after %v; after %d acquire/release rounds of another owner: %+v; Acquire(3): %v after %v",
					key, told.Round(time.Millisecond), rounds, st, err, time.Since(start).Round(time.Millisecond))
				if st.Held != 0 || st.Holders != 0 {
					t.Errorf("state after the busy rounds: Held %d, Holders %d; want 0, 0", st.Held, st.Holders)
				}
				if err != nil {
					t.Fatalf("Acquire(3) on the idle semaphore: %v; want all 3 permits within a lease", err)
				}
				if err := b.Release(ctx, 3); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
