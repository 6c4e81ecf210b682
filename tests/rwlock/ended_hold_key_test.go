package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// TestEndedWriteHoldKeyVanishesOnceNoWaiterIsQueued: a waiter, writer or
// reader, that queued behind a fixed-lease write hold and gave up (its
// abandon ran) leaves nothing else on the lock; once that hold runs out
// the lock is free, and its main key must be gone: keys vanish when the
// lock is free, and the main key outlives a write hold only for what is
// still behind it.
func TestEndedWriteHoldKeyVanishesOnceNoWaiterIsQueued(t *testing.T) {
	srv := testserver.Real(t)
	for _, side := range []string{"writer", "reader"} {
		t.Run(side, func(t *testing.T) {
			ctx := context.Background()
			p := prefix(t)
			const lease = 300 * time.Millisecond
			holder := rwlock.New(srv.NewBackend(t), "ended", rwlock.WithPrefix(p), rwlock.WithLease(lease), rwlock.WithLogger(nil))
			ho := dsync.WithOwner(ctx)
			if err := holder.LockContext(ho); err != nil {
				t.Fatal(err)
			}
			w := rwlock.New(srv.NewBackend(t), "ended", rwlock.WithPrefix(p), rwlock.WithWaiterTimeout(5*time.Second), rwlock.WithLogger(nil))
			wctx, cancel := context.WithTimeout(dsync.WithOwner(ctx), 100*time.Millisecond)
			var err error
			if side == "writer" {
				err = w.LockContext(wctx)
			} else {
				err = w.RLockContext(wctx)
			}
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the waiting %s's lock: %v; want its deadline", side, err)
			}
			if st := state(t, ctx, holder); st.Mode != rwlock.Write || st.WaitingWriters != 0 || st.WaitingReaders != 0 {
				t.Fatalf("State once the waiter gave up = %+v; want written, nobody waiting", st)
			}
			// Time is what is tested: the hold's lease runs out by itself.
			time.Sleep(lease + 200*time.Millisecond)
			if st := state(t, ctx, holder); st.Mode != rwlock.Free {
				t.Fatalf("State past the lease = %+v; want free", st)
			}
			if left := keysLeft(t, srv, p); len(left) > 0 {
				t.Errorf("keys past the write hold's end, nobody waiting: %v; want none", left)
			}
		})
	}
}
