package rwlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestReadersToldWhenMainKeyMissingAtRenewal: readers hold and the lock's
// main key alone is deleted behind dsync's back (or evicted). A missing
// main key says that nothing is on the lock, so a plain writer may take
// it; the readers must learn that their holds are lost at their next
// renewal, whatever the writer did since:
//
//   - a plain writer took the lock and released it before any reader
//     renewed: each reader was read under a writer, and must be told;
//   - no writer came yet: a renewal that finds its read hold live but the
//     main key missing must either report the hold lost or write the key
//     back, so that a writer coming later is kept out; it must not renew
//     the hold and leave the key missing, which lets any number of plain
//     writers in beside a live reader, one after another, none of them
//     ever seen by a renewal if each is gone before it.
func TestReadersToldWhenMainKeyMissingAtRenewal(t *testing.T) {
	const lease = 600 * time.Millisecond
	// hold starts two readers on the watchdog, so that W is the shared
	// form and the read holds are in the other keys, and deletes W.
	hold := func(t *testing.T, name string) (*rwlock.RWMutex, []*rwlock.RWMutex) {
		srv := fake.Fake(t)
		ctx := context.Background()
		var readers []*rwlock.RWMutex
		for range 2 {
			r := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithWatchdog(lease), rwlock.WithLogger(nil))
			if err := r.RLockContext(ctx); err != nil {
				t.Fatal(err)
			}
			readers = append(readers, r)
		}
		srv.Del(key("dsync", name))
		return rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil)), readers
	}
	t.Run("writer came and went", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			w, readers := hold(t, "cameandwent")
			ok, err := w.TryLockContext(ctx)
			if err != nil || !ok {
				t.Fatalf("a plain writer's TryLock with the main key deleted = %v, %v; want true (the move documented)", ok, err)
			}
			if err := w.UnlockContext(ctx); err != nil {
				t.Fatal(err)
			}
			for i, r := range readers {
				select {
				case <-r.RDone(ctx):
				case <-time.After(lease):
					t.Errorf("reader %d not told within a lease (%v) that a writer held the lock while it read", i, lease)
				}
			}
		})
	})
	t.Run("writer after a renewal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			w, readers := hold(t, "afterrenewal")
			// Two renewal intervals (a third of the lease each) and more:
			// every reader renewed at least once with the key missing.
			time.Sleep(lease)
			ok, err := w.TryLockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return // the renewals wrote the main key back
			}
			defer w.UnlockContext(ctx)
			for i, r := range readers {
				select {
				case <-r.RDone(ctx):
				default:
					t.Errorf("reader %d renewed its hold with the main key missing, and a plain writer took the lock beside it a lease later", i)
				}
			}
		})
	})
}
