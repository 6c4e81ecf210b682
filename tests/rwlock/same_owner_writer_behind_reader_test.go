package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestQueuedWriterWaitsForItsOwnersHandedReader: owner o, which holds
// nothing, waits for the write lock behind another owner's write hold;
// another goroutine of o then waits for a read hold. When the write hold
// ends, the lock goes first to the reader that waited it out (doc.go, "Who
// goes first"), which gives o a read hold. o's writer, queued before o
// held anything, must go on waiting, for o's read hold as for any other,
// and get the lock once it is released. Its next attempt failed instead
// with ErrUpgrade, which LockContext promises at once, and only to an
// owner that holds a read hold when it asks: the acquisition ended,
// though o never asked to upgrade. Before b4fc3f0 this happened when the
// write hold was released; since, also when it ran out, where the queued
// writer used to take the lock and o's reader to enter under it.
func TestQueuedWriterWaitsForItsOwnersHandedReader(t *testing.T) {
	for _, end := range []string{"released", "ran out"} {
		t.Run(end, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "ownwriter"
				holder := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLease(time.Second), rwlock.WithLogger(nil))
				holder.Lock()
				m := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil))
				o := dsync.WithOwner(ctx)
				wGot, rGot := make(chan error, 1), make(chan error, 1)
				go func() { wGot <- m.LockContext(o) }()
				synctest.Wait()
				go func() { rGot <- m.RLockContext(o) }()
				synctest.Wait()
				if st := state(t, ctx, holder); st.WaitingWriters != 1 || st.WaitingReaders != 1 {
					t.Fatalf("want o's writer and reader waiting: %+v", st)
				}
				if end == "released" {
					holder.Unlock()
				} else {
					time.Sleep(1100 * time.Millisecond)
				}
				if err := within(t, rGot, "o's reader"); err != nil {
					t.Fatalf("o's reader: %v", err)
				}
				// o reads for a while: its writer tries again meanwhile.
				time.Sleep(3 * time.Second)
				select {
				case err := <-wGot:
					t.Fatalf("o's queued writer, while o's other goroutine reads: %v (ErrUpgrade: %v); want it waiting", err, errors.Is(err, dsync.ErrUpgrade))
				default:
				}
				if err := m.RUnlockContext(o); err != nil {
					t.Fatal(err)
				}
				if err := within(t, wGot, "o's writer"); err != nil {
					t.Fatalf("o's writer, once o's read hold was released: %v", err)
				}
				if err := m.UnlockContext(o); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
