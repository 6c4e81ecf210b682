package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// A raised capacity admits the queued waiters that now fit at once, in
// the SetCapacity script, whether they are in the caller's process or
// another (woken through pub/sub); the heartbeat (5s/3) is far off.
func TestRaiseCapacityAdmitsWaiters(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, remote := range []bool{false, true} {
		name := "raise-" + dsync.NewID()[:8]
		var sb backend.Backend = srv.NewBackend(t)
		if remote {
			sb = elsewhere{sb}
		}
		setter := semaphore.New(sb, name, 2)
		holder := semaphore.New(srv.NewBackend(t), name, 2)
		if err := holder.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		a := semaphore.New(srv.NewBackend(t), name, 2)
		b := semaphore.New(srv.NewBackend(t), name, 2)
		aGot := acquire(ctx, a, 1)
		awaitState(t, ctx, holder, "a queued", func(st semaphore.State) bool { return st.Queued == 1 })
		bGot := acquire(ctx, b, 2)
		awaitState(t, ctx, holder, "b queued", func(st semaphore.State) bool { return st.Queued == 2 })
		start := time.Now()
		if err := setter.SetCapacity(ctx, 4); err != nil { // a fits, b not: 2+1+2 > 4
			t.Fatal(err)
		}
		d := within(t, "a after the capacity rose to 4", aGot, start, time.Second)
		awaitState(t, ctx, holder, "b still queued", func(st semaphore.State) bool {
			return st.Queued == 1 && st.Held == 3 && st.Capacity == 4 && st.Set
		})
		idle(t, "b's Acquire(2) with 1 permit free", bGot)
		start = time.Now()
		if err := setter.SetCapacity(ctx, 5); err != nil {
			t.Fatal(err)
		}
		d2 := within(t, "b after the capacity rose to 5", bGot, start, time.Second)
		t.Logf("remote %v: waiters admitted %v and %v after SetCapacity", remote, d, d2)
		if d > 200*time.Millisecond || d2 > 200*time.Millisecond {
			t.Errorf("remote %v: waiters admitted %v and %v after the capacity rose; want at once (≤200ms)", remote, d, d2)
		}
		st, err := holder.State(ctx)
		if err != nil || st.Held != 5 || st.Available != 0 {
			t.Errorf("remote %v: %+v, %v; want 5 of 5 held", remote, st, err)
		}
		for _, r := range []struct {
			s *semaphore.Semaphore
			n int64
		}{{holder, 2}, {a, 1}, {b, 2}} {
			if err := r.s.Release(ctx, r.n); err != nil {
				t.Error(err)
			}
		}
		if err := setter.SetCapacity(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if k := keysLeft(t, ctx, srv, "dsync:semaphore:{"+name+"}*"); len(k) != 0 {
			t.Errorf("keys left: %v", k)
		}
	}
}

// A lowered capacity revokes nothing: the holder above it keeps its
// permits (and can give them back one by one), nobody acquires until the
// permits held fall below it, and a queued waiter asking for more than
// it learns so at once, matching ErrInvalidPermits.
func TestLowerCapacityWhileQueued(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "lower-" + dsync.NewID()[:8]
	open := func() *semaphore.Semaphore { return semaphore.New(srv.NewBackend(t), name, 4) }
	x, big, w, probe := open(), open(), open(), open()
	o := dsync.WithOwner(ctx)
	if err := x.Acquire(o, 3); err != nil {
		t.Fatal(err)
	}
	done := x.Done(o)
	bigGot := acquire(ctx, big, 3) // queued: 3+3 > 4
	awaitState(t, ctx, probe, "big queued", func(st semaphore.State) bool { return st.Queued == 1 })
	wGot := acquire(ctx, w, 1) // behind big
	awaitState(t, ctx, probe, "w queued", func(st semaphore.State) bool { return st.Queued == 2 })
	if err := probe.SetCapacity(ctx, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bigGot:
		if !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Fatalf("Acquire(3) queued when the capacity fell to 2 = %v; want ErrInvalidPermits", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Acquire(3) still waiting 1s after the capacity fell to 2")
	}
	st, err := x.State(o)
	if err != nil || st.Capacity != 2 || st.Held != 3 || st.Permits != 3 || st.Available != 0 || st.Queued != 1 {
		t.Fatalf("after lowering to 2 under a holder of 3: %+v, %v", st, err)
	}
	if ok, err := probe.TryAcquire(ctx, 1); ok || err != nil {
		t.Errorf("TryAcquire(1) with 3 held of 2 = %v, %v", ok, err)
	}
	if err := x.Release(o, 1); err != nil { // 2 held of 2: still full
		t.Fatal(err)
	}
	awaitState(t, ctx, probe, "2 held, w queued", func(st semaphore.State) bool { return st.Held == 2 && st.Queued == 1 })
	idle(t, "w's Acquire(1) with 2 held of 2", wGot)
	select {
	case <-done:
		t.Fatal("the holder above the lowered capacity lost its permits")
	default:
	}
	if err := x.Release(o, 1); err != nil { // 1 held: w fits
		t.Fatal(err)
	}
	within(t, "w once 1 of 2 was held", wGot, time.Now(), time.Second)
	if st, err := probe.State(ctx); err != nil || st.Held != 2 {
		t.Errorf("%+v, %v; want 2 held", st, err)
	}
	if err := x.Release(o, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := probe.SetCapacity(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// Two processes configured with different capacities: the second learns
// it (ErrCapacityMismatch) from Acquire and TryAcquire, and leaves nothing
// behind; once the semaphore is free, the first to acquire sets the
// capacity. A capacity set at runtime suspends the check; clearing it
// under a holder gives the state the clearing handle's capacity, so the
// other handle learns of the mismatch then, but can still release.
func TestDisagreeingCapacities(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "disagree-" + dsync.NewID()[:8]
	three := semaphore.New(srv.NewBackend(t), name, 3)
	five := semaphore.New(srv.NewBackend(t), name, 5)
	if err := three.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	short, c := context.WithTimeout(ctx, time.Second)
	err := five.Acquire(short, 1)
	c()
	if !errors.Is(err, semaphore.ErrCapacityMismatch) {
		t.Errorf("Acquire through a handle of capacity 5 on one of 3 = %v", err)
	}
	if ok, err := five.TryAcquire(ctx, 1); ok || !errors.Is(err, semaphore.ErrCapacityMismatch) {
		t.Errorf("TryAcquire through a handle of capacity 5 on one of 3 = %v, %v", ok, err)
	}
	if st, err := three.State(ctx); err != nil || st.Held != 2 || st.Queued != 0 || st.Capacity != 3 {
		t.Errorf("after the mismatches: %+v, %v; want 2 held of 3, nobody queued", st, err)
	}
	if err := five.SetCapacity(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := five.Acquire(ctx, 2); err != nil { // 2+2 of 4
		t.Fatalf("Acquire through capacity 5 under a runtime capacity of 4: %v", err)
	}
	if ok, err := three.TryAcquire(ctx, 1); ok || err != nil {
		t.Errorf("TryAcquire with 4 of 4 held = %v, %v", ok, err)
	}
	if err := five.SetCapacity(ctx, 0); err != nil { // the state's capacity is now 5
		t.Fatal(err)
	}
	if ok, err := three.TryAcquire(ctx, 1); ok || !errors.Is(err, semaphore.ErrCapacityMismatch) {
		t.Errorf("TryAcquire through capacity 3 after the runtime capacity was cleared by a handle of 5 = %v, %v", ok, err)
	}
	if err := three.Release(ctx, 2); err != nil {
		t.Errorf("release through the mismatched handle: %v", err)
	}
	if err := five.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// Free: the first to acquire sets the capacity.
	if err := five.Acquire(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if ok, err := three.TryAcquire(ctx, 1); ok || !errors.Is(err, semaphore.ErrCapacityMismatch) {
		t.Errorf("TryAcquire through capacity 3 on one of 5 = %v, %v", ok, err)
	}
	if err := five.Release(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if k := keysLeft(t, ctx, srv, "dsync:semaphore:{"+name+"}*"); len(k) != 0 {
		t.Errorf("keys left: %v", k)
	}
}
