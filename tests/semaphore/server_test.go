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
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// private starts a redis-server of the test's own, which it may stall
// or restart.
func private(t *testing.T) *testserver.Server {
	t.Helper()
	testserver.Real(t) // skips without redis-server
	srv, err := testserver.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if !srv.Restartable() {
		t.Skip("an external server cannot be stalled or restarted")
	}
	return srv
}

// A server stalled (DEBUG SLEEP) past a holder's lease, with a waiter
// queued: nothing hangs; the holder's Done closes no later than the
// waiter acquires (the holder learns of its loss before anyone else is
// given its permits), its release reports ErrNotHeld and does not touch
// the waiter's permits.
func TestServerStall(t *testing.T) {
	srv := private(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const leaseD = 600 * time.Millisecond
	holder := semaphore.New(srv.NewBackend(t), "stall", 2, semaphore.WithWatchdog(leaseD), semaphore.WithLogger(nil))
	w := semaphore.New(srv.NewBackend(t), "stall", 2, semaphore.WithWaiterTimeout(3*time.Second), semaphore.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	if err := holder.Acquire(o, 2); err != nil {
		t.Fatal(err)
	}
	done := holder.Done(o)
	wo := dsync.WithOwner(ctx)
	got := acquire(wo, w, 1)
	awaitState(t, ctx, holder, "w queued", func(st semaphore.State) bool { return st.Queued == 1 })
	paused := make(chan error, 1)
	start := time.Now()
	go func() { paused <- srv.Pause(ctx, 2*leaseD) }()
	var lostAt time.Time
	select {
	case <-done:
		lostAt = time.Now()
	case err := <-got:
		t.Fatalf("the waiter acquired (%v) %v into the stall while the holder's Done was open", err, time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("the holder's Done still open 10s into a stall of 1.2s past its 600ms lease")
	}
	if err := <-paused; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not acquire within 5s of the stall's end")
	}
	t.Logf("holder's Done closed %v into the stall; waiter acquired %v after it", lostAt.Sub(start), time.Since(lostAt))
	if err := holder.Release(o, 2); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("the lost holder's release = %v, want ErrNotHeld", err)
	}
	st, err := w.State(wo)
	if err != nil || st.Held != 1 || st.Permits != 1 {
		t.Errorf("after the stall: %+v, %v; want the waiter's 1 permit", st, err)
	}
	if err := w.Release(wo, 1); err != nil {
		t.Fatal(err)
	}
}

// A server restarted empty (no persistence) while permits are held and
// waiters queued: the holders' Done close (the lost signal) at their next
// renewal, their releases report ErrNotHeld, the waiters acquire, nothing
// hangs, and from then on permits held never exceed the capacity.
func TestServerRestart(t *testing.T) {
	srv := private(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const capacity = 2
	open := func() *semaphore.Semaphore {
		return semaphore.New(srv.NewBackend(t), "restart", capacity, semaphore.WithWatchdog(600*time.Millisecond),
			semaphore.WithWaiterTimeout(time.Second), semaphore.WithLogger(nil))
	}
	h1, h2 := open(), open()
	o1, o2 := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	if err := h1.Acquire(o1, 1); err != nil {
		t.Fatal(err)
	}
	if err := h2.Acquire(o2, 1); err != nil {
		t.Fatal(err)
	}
	w1, w2 := open(), open()
	wo1, wo2 := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	g1 := acquire(wo1, w1, 2)
	awaitState(t, ctx, h1, "w1 queued", func(st semaphore.State) bool { return st.Queued == 1 })
	g2 := acquire(wo2, w2, 1)
	awaitState(t, ctx, h1, "w2 queued", func(st semaphore.State) bool { return st.Queued == 2 })
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for i, d := range []<-chan struct{}{h1.Done(o1), h2.Done(o2)} {
		select {
		case <-d:
		case <-time.After(5 * time.Second):
			t.Fatalf("holder %d's Done still open 5s after the server restarted empty", i+1)
		}
	}
	t.Logf("holders lost %v after the restart", time.Since(restarted))
	// The waiters acquire: w1 (2) then w2, or w2 first if w1's place went
	// with the restart and w2 asked again first.
	var wg sync.WaitGroup
	for i, c := range []struct {
		s   *semaphore.Semaphore
		ctx context.Context
		got <-chan error
		n   int64
	}{{w1, wo1, g1, 2}, {w2, wo2, g2, 1}} {
		wg.Go(func() {
			select {
			case err := <-c.got:
				if err != nil {
					t.Errorf("waiter %d: %v", i+1, err)
					return
				}
			case <-time.After(10 * time.Second):
				t.Errorf("waiter %d did not acquire within 10s of the restart", i+1)
				return
			}
			time.Sleep(10 * time.Millisecond)
			if err := c.s.Release(c.ctx, c.n); err != nil {
				t.Errorf("waiter %d: release: %v", i+1, err)
			}
		})
	}
	wg.Wait()
	for i, r := range []struct {
		s   *semaphore.Semaphore
		ctx context.Context
	}{{h1, o1}, {h2, o2}} {
		if err := r.s.Release(r.ctx, 1); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("holder %d's release after the restart = %v, want ErrNotHeld", i+1, err)
		}
	}
	// From now on: never more than the capacity.
	var held, over atomic.Int64
	stop := time.Now().Add(500 * time.Millisecond)
	for range 4 {
		s := open()
		wg.Go(func() {
			for j := 0; j < 1000 && time.Now().Before(stop); j++ {
				n := 1 + rand.Int64N(capacity)
				if err := s.Acquire(ctx, n); err != nil {
					t.Error(err)
					return
				}
				if held.Add(n) > capacity {
					over.Add(1)
				}
				time.Sleep(time.Duration(rand.N(1000)) * time.Microsecond)
				held.Add(-n)
				if err := s.Release(ctx, n); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("%d times more than %d permits held after the restart", n, capacity)
	}
	if st, err := h1.State(ctx); err != nil || st.Held != 0 || st.Queued != 0 {
		t.Errorf("at the end: %+v, %v", st, err)
	}
}

// A flushed script cache (a restart, a failover) is invisible: renewals,
// waiters and releases carry on.
func TestScriptFlush(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "flush-" + dsync.NewID()[:8]
	holder := semaphore.New(srv.NewBackend(t), name, 1, semaphore.WithWatchdog(300*time.Millisecond))
	if err := holder.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	done := holder.Done(ctx)
	w := semaphore.New(srv.NewBackend(t), name, 1)
	got := acquire(ctx, w, 1)
	for i := 0; ; i++ {
		st, err := holder.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued == 1 {
			break
		}
		if i > 5000 {
			t.Fatal("waiter not queued")
		}
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		if err := srv.FlushScripts(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			t.Fatal("the holder lost its permit after SCRIPT FLUSH")
		case err := <-got:
			t.Fatalf("the waiter acquired a held permit: %v", err)
		case <-time.After(300 * time.Millisecond): // a renewal
		}
	}
	released := time.Now()
	if err := holder.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	t.Logf("waiter acquired %v after the release", time.Since(released))
	if err := w.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// A waiter whose pub/sub connection is killed still hears the release:
// the adapter's gap wakes it, and its attempt finds the permits.
func TestKilledPubSub(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "killsub-" + dsync.NewID()[:8]
	holder := semaphore.New(elsewhere{srv.NewBackend(t)}, name, 2)
	for round := range 2 {
		if err := holder.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		w := semaphore.New(srv.NewBackend(t), name, 2, semaphore.WithWaiterTimeout(time.Minute))
		got := acquire(ctx, w, 2)
		for i := 0; ; i++ {
			st, err := holder.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Queued == 1 {
				break
			}
			if i > 5000 {
				t.Fatal("waiter not queued")
			}
			time.Sleep(time.Millisecond)
		}
		if err := srv.KillPubSub(ctx); err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			time.Sleep(200 * time.Millisecond) // resubscribed before the release
		}
		released := time.Now()
		if err := holder.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the waiter did not acquire within 5s of the release (its heartbeat is 20s)", round)
		}
		t.Logf("round %d: waiter acquired %v after the release", round, time.Since(released))
		if err := w.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
}
