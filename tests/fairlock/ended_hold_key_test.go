package fairlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// TestEndedHoldKeyVanishesOnceNoWaiterIsQueued: a waiter that queued
// behind a fixed-lease hold and gave up (its abandon ran) leaves no one
// queued; once that hold runs out the lock is free, and its key must be
// gone, as it was before the end form: keys vanish when the primitive is
// free (DESIGN.md), and the key outlives an ended hold only while
// waiters are queued (fairlock's doc).
func TestEndedHoldKeyVanishesOnceNoWaiterIsQueued(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	name := "ended-key-" + dsync.NewID()[:12]
	key := "dsync:fairlock:{" + name + "}"
	ctx := context.Background()

	const lease = 300 * time.Millisecond
	holder := fairlock.New(b, name, fairlock.WithLease(lease), fairlock.WithLogger(nil))
	ho := dsync.WithOwner(ctx)
	if err := holder.LockContext(ho); err != nil {
		t.Fatal(err)
	}
	w := fairlock.New(b, name, fairlock.WithLease(lease), fairlock.WithWaiterTimeout(5*time.Second), fairlock.WithLogger(nil))
	wctx, cancel := context.WithTimeout(dsync.WithOwner(ctx), 100*time.Millisecond)
	err := w.LockContext(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the waiter's LockContext: %v; want its deadline", err)
	}
	if st, err := holder.State(ctx); err != nil || !st.Locked || st.Queued != 0 {
		t.Fatalf("State once the waiter gave up = %+v, %v; want held, nobody queued", st, err)
	}
	// Time is what is tested: the hold's lease runs out by itself.
	time.Sleep(lease + 200*time.Millisecond)
	if st, err := holder.State(ctx); err != nil || st.Locked {
		t.Fatalf("State past the lease = %+v, %v; want free", st, err)
	}
	n, err := srv.Do(ctx, "EXISTS", key)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(0) {
		v, _ := srv.Do(ctx, "GET", key)
		ttl, _ := srv.Do(ctx, "PTTL", key)
		t.Errorf("the lock key past the hold's end, nobody queued: %q, PTTL %v ms; want it gone", v, ttl)
	}
}
