package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// TestRecordedCapacityVanishesWithLastPermit: the capacity that the first
// acquisition recorded with the state binds handles only while the state
// is in use (a permit held or a waiter queued). A waiter that gave up
// while the only holder's fixed lease ran leaves nobody queued; once that
// lease ends, every permit is free and nobody is queued, and a handle
// configured with another capacity acquires rather than fail with
// ErrCapacityMismatch: the state, and the capacity it recorded, went with
// the last permit, whatever place the waiter that left once had.
func TestRecordedCapacityVanishesWithLastPermit(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "vanishes-" + dsync.NewID()[:8]
	holder := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLease(time.Second), semaphore.WithLogger(nil))
	if err := holder.Acquire(ctx, 4); err != nil { // never given back
		t.Fatal(err)
	}
	// A waiter with a long place, which gives up while queued.
	w := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithWaiterTimeout(10*time.Second), semaphore.WithLogger(nil))
	wctx, wcancel := context.WithCancel(ctx)
	got := acquire(wctx, w, 1)
	awaitState(t, ctx, holder, "the waiter queued", func(st semaphore.State) bool { return st.Queued == 1 })
	wcancel()
	if err := <-got; err == nil {
		t.Fatal("the waiter acquired behind 4 of 4 held")
	}
	awaitState(t, ctx, holder, "every permit free and nobody queued", func(st semaphore.State) bool {
		return st.Held == 0 && st.Holders == 0 && st.Queued == 0
	})

	other := semaphore.New(srv.NewBackend(t), name, 2, semaphore.WithLogger(nil))
	ok, err := other.TryAcquire(ctx, 1)
	if !ok || err != nil {
		st, _ := holder.State(ctx)
		t.Fatalf("TryAcquire(1) through a handle of capacity 2 on a semaphore with no permit held and nobody queued = %v, %v (%+v); want the permit", ok, err, st)
	}
	if err := other.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if left := keysLeft(t, ctx, srv, "dsync:semaphore:{"+name+"}*"); len(left) > 0 {
		t.Errorf("keys left once every permit is back: %v", left)
	}
}
