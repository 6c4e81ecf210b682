package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
	"github.com/gomodule/redigo/redis"
)

// One owner acquiring and releasing a permit at a time from three
// goroutines, through two handles, against two other contenders, so that
// its permits are handed to it by releases (its own included), its hold
// ends and starts again, and grows and shrinks, over several watchdog
// leases: its count on the server is exact at every step, no release is
// refused, permits never exceed the capacity, and all come back.
func TestSameOwnerTwoGoroutines(t *testing.T) {
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

// A release of more permits than the owner holds, through another
// handle and backend, is refused (ErrNotHeld) and changes nothing: the
// permits, the queue and the owner's lease, which its watchdog keeps
// renewing; ownerless, the handle's count is unchanged.
func TestReleaseMoreThanHeldRefused(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "relmore-" + dsync.NewID()[:8]
	a := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithWatchdog(300*time.Millisecond))
	b := semaphore.New(srv.NewBackend(t), name, 4)
	o := dsync.WithOwner(ctx)
	if err := a.Acquire(o, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx, 1); err != nil { // ownerless, through a
		t.Fatal(err)
	}
	done := a.Done(o)
	w := semaphore.New(srv.NewBackend(t), name, 4)
	wGot := acquire(ctx, w, 2) // 3 held: waits
	awaitState(t, ctx, b, "w queued", func(st semaphore.State) bool { return st.Queued == 1 })
	for _, s := range []*semaphore.Semaphore{a, b} {
		if err := s.Release(o, 3); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("Release(3) of the owner's 2 = %v, want ErrNotHeld", err)
		}
	}
	if err := a.Release(ctx, 2); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("ownerless Release(2) of 1 = %v, want ErrNotHeld", err)
	}
	if err := b.Release(ctx, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("ownerless Release(1) through a handle that took none = %v, want ErrNotHeld", err)
	}
	st, err := b.State(o)
	if err != nil || st.Permits != 2 || st.Held != 3 || st.Holders != 2 || st.Queued != 1 {
		t.Fatalf("after the refused releases: %+v, %v; want nothing changed", st, err)
	}
	idle(t, "w", wGot)
	time.Sleep(time.Second) // several renewals
	select {
	case <-done:
		t.Fatal("the owner's lease ended after a refused release")
	default:
	}
	if st, err := b.State(o); err != nil || st.Permits != 2 {
		t.Fatalf("the owner's permits after 1s: %+v, %v", st, err)
	}
	start := time.Now()
	if err := a.Release(ctx, 1); err != nil { // the handle's count is intact
		t.Fatal(err)
	}
	within(t, "w", wGot, start, time.Second)
	if err := a.Release(o, 2); err != nil { // through the backend value that took them
		t.Fatal(err)
	}
	w.Release(ctx, 2)
}

// An owner's permits belong to the owner and to the backend value they
// were taken through: a handle on another backend value of the same
// server reports them (State asks the server) but cannot release them,
// which ErrNotHeld says, and changes nothing; the first handle's releases
// do, and the holder's Done closes with the last.
func TestSecondBackendValueCannotRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		o := dsync.WithOwner(ctx)
		s1 := semaphore.New(fake.FakeBackend(t, srv), "two", 3)
		s2 := semaphore.New(fake.FakeBackend(t, srv), "two", 3)
		if err := s1.Acquire(o, 2); err != nil {
			t.Fatal(err)
		}
		done := s1.Done(o)
		if st, err := s2.State(o); err != nil || st.Permits != 2 {
			t.Errorf("State through the second handle = %+v, %v; want the owner's 2 permits", st, err)
		}
		if err := s2.Release(o, 1); !errors.Is(err, dsync.ErrNotHeld) || !strings.Contains(err.Error(), "another backend value") {
			t.Fatalf("Release through the second backend value = %v, want ErrNotHeld naming the other backend value", err)
		}
		if st, err := s2.State(o); err != nil || st.Permits != 2 {
			t.Errorf("after the refused release = %+v, %v; want the owner's 2 permits", st, err)
		}
		if err := s1.Release(o, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			t.Fatal("Done closed with a permit left")
		default:
		}
		if err := s1.Release(o, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		default:
			t.Error("Done open after the last permit was released")
		}
		if err := s1.Release(o, 1); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("a third release = %v, want ErrNotHeld", err)
		}
	})
}

// An owner that holds permits and waits for more is handed them by a
// release, local or through pub/sub: they join its one hold, which keeps
// its id and lease, and one release gives all back.
func TestHandOffToHoldingOwner(t *testing.T) {
	for _, remote := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			srv := fake.Fake(t)
			ctx := context.Background()
			var xb backend.Backend = fake.FakeBackend(t, srv)
			if remote {
				xb = elsewhere{xb}
			}
			x := semaphore.New(xb, "more", 2)
			if err := x.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			o := dsync.WithOwner(ctx)
			s := semaphore.New(fake.FakeBackend(t, srv), "more", 2, semaphore.WithWatchdog(3*time.Second))
			if err := s.Acquire(o, 1); err != nil {
				t.Fatal(err)
			}
			done := s.Done(o)
			got := acquire(o, s, 1)
			queued(t, got)
			if err := x.Release(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			if st, err := s.State(o); err != nil || st.Permits != 2 || st.Holders != 1 {
				t.Errorf("remote %v: after the hand-off: %+v, %v; want the owner's 2 permits in one hold", remote, st, err)
			}
			time.Sleep(time.Minute) // renewals find the one hold
			select {
			case <-done:
				t.Fatalf("remote %v: the owner's hold was lost after permits were added to it", remote)
			default:
			}
			if err := s.Release(o, 2); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			default:
				t.Errorf("remote %v: Done open after all permits were given back", remote)
			}
			if k := fakeKeysLeft(srv); len(k) != 0 {
				t.Errorf("keys left: %v", k)
			}
		})
	}
}
