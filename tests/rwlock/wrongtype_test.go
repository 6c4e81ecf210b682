package rwlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// TestWrongTypeKeys: a key of the wrong type at each of the lock's
// seven keys, while a writer holds, a reader and a writer wait. Every error
// must match dsync.ErrUnexpectedReply (or be the waiter's own deadline),
// and once the bad key is deleted the lock must work again: nothing stuck,
// every waiter's claim gone, a writer and a reader get in.
func TestWrongTypeKeys(t *testing.T) {
	srv := testserver.Real(t)
	for _, suffix := range []string{"", ":readers", ":rexpiry", ":wqueue", ":wexpiry", ":rwait", ":fence"} {
		t.Run("key"+suffix, func(t *testing.T) {
			ctx := context.Background()
			p := prefix(t)
			k := key(p, "wt") + suffix
			open := func() *rwlock.RWMutex {
				return rwlock.New(srv.NewBackend(t), "wt", rwlock.WithPrefix(p), rwlock.WithLogger(nil),
					rwlock.WithWaiterTimeout(600*time.Millisecond))
			}
			x, r, w, probe := open(), open(), open(), open()
			bad := func(what string, err error) {
				t.Helper()
				if err != nil && !errors.Is(err, dsync.ErrUnexpectedReply) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s with a %s of the wrong type: %v; want nil or ErrUnexpectedReply", what, k, err)
				}
			}
			ox := dsync.WithOwner(ctx)
			if err := x.LockContext(ox); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			or, ow := dsync.WithOwner(wctx), dsync.WithOwner(wctx)
			var wg sync.WaitGroup
			var rerr, werr error
			wg.Go(func() { rerr = r.RLockContext(or) })
			await(t, ctx, probe, "reader waiting", func(s rwlock.State) bool { return s.WaitingReaders == 1 })
			wg.Go(func() { werr = w.LockContext(ow) })
			await(t, ctx, probe, "writer waiting", func(s rwlock.State) bool { return s.WaitingWriters == 1 })
			// Corrupt the key.
			srv.Do(ctx, "DEL", k)
			if suffix == "" || suffix == ":fence" {
				srv.Do(ctx, "HSET", k, "f", "v")
			} else {
				srv.Do(ctx, "SET", k, "garbage")
			}
			bad("Unlock", x.UnlockContext(ox))
			_, err := probe.TryLockContext(ctx)
			bad("TryLock", err)
			_, err = probe.TryRLockContext(ctx)
			bad("TryRLock", err)
			_, err = probe.State(ctx)
			bad("State", err)
			wg.Wait()
			bad("the waiting reader's RLock", rerr)
			bad("the waiting writer's Lock", werr)
			// Repair, release whatever was got.
			srv.Do(ctx, "DEL", k)
			if rerr == nil {
				bad("reader's RUnlock", r.RUnlockContext(or))
			}
			if werr == nil {
				bad("writer's Unlock", w.UnlockContext(ow))
			}
			x.UnlockContext(ox)
			probe.UnlockContext(ctx)
			probe.RUnlockContext(ctx)
			// A hold that was handed out but whose holder never heard lasts
			// at most the hand-off lease (2s): allow that, then the lock must
			// be free and work.
			deadline := time.Now().Add(4 * time.Second)
			for {
				st, err := probe.State(ctx)
				if err == nil && st.Mode == rwlock.Free && st.WaitingReaders == 0 && st.WaitingWriters == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the bad key %s was deleted and every hold released, the lock is not free within 4s: %+v, %v", k, st, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
			defer lcancel()
			if err := probe.LockContext(lctx); err != nil {
				t.Errorf("Lock after repair: %v", err)
			} else {
				probe.Unlock()
			}
			if err := probe.RLockContext(lctx); err != nil {
				t.Errorf("RLock after repair: %v", err)
			} else {
				probe.RUnlock()
			}
			if bad := keysLeft(t, srv, p); len(bad) > 0 {
				t.Errorf("keys left after repair: %v", bad)
			}
		})
	}
}
