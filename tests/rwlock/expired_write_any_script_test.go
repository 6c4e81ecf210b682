package rwlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// The tests here pin that a write hold that ran out passes the lock on as
// its release would have (rwlock/doc.go, "Who goes first"), whichever
// script of the lock is the first to find it ended: not only an attempt
// (readers_due in rw.lua), but also an abandon, a read release and a read
// renewal. Each failed before its fix: the queued writer took the lock
// ahead of the reader that had waited out the write hold.

// expiredWriteQueue takes a write hold on a fixed lease of a second that
// is never released, with a reader waiting behind it, then a writer; their
// next attempts are held up from then on, as those of processes stalled
// between two attempts. It returns the order of holds and their results.
func expiredWriteQueue(t *testing.T, srv *miniredis.Miniredis, name string, holder *rwlock.RWMutex, lock func() error) (*holdOrder, <-chan error, <-chan error, func()) {
	t.Helper()
	ctx := context.Background()
	if err := lock(); err != nil {
		t.Fatal(err)
	}
	rb := fake.NewGated(t, fake.FakeBackend(t, srv))
	wb := fake.NewGated(t, fake.FakeBackend(t, srv))
	o := &holdOrder{}
	rGot := o.reader(ctx, rwlock.New(rb, name, rwlock.WithLogger(nil)), "reader")
	synctest.Wait()
	wGot := o.writer(ctx, rwlock.New(wb, name, rwlock.WithLogger(nil)), "writer")
	synctest.Wait()
	if st := state(t, ctx, holder); st.WaitingReaders != 1 || st.WaitingWriters != 1 {
		t.Fatalf("behind the write hold: %+v; want a reader and a writer waiting", st)
	}
	rb.HoldEvals()
	wb.HoldEvals()
	return o, rGot, wGot, func() {
		rb.OpenEvals()
		wb.OpenEvals()
	}
}

// readerHandedFirst checks, once the waiters go on, that the reader held
// the lock before the writer.
func readerHandedFirst(t *testing.T, o *holdOrder, rGot, wGot <-chan error, open func()) {
	t.Helper()
	open()
	for _, c := range []<-chan error{rGot, wGot} {
		if err := within(t, c, "an acquisition"); err != nil {
			t.Fatal(err)
		}
	}
	if got := o.order(); len(got) != 2 || got[0] != "reader" {
		t.Errorf("held in the order %v; want the reader that waited out the write hold first, as a release of it would have", got)
	}
}

// TestExpiredWriteAbandonHandsReadersFirst: the first script to find the
// write hold ended is the abandon of a third waiter, a reader that gave
// up. It passed the lock on as a read release does (after_write false):
// to the queued writer, while the reader that waited out the write hold
// went on waiting.
func TestExpiredWriteAbandonHandsReadersFirst(t *testing.T) {
	for _, role := range []string{"reader", "writer"} {
		t.Run("a "+role+" gives up", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "abandon"
				holder := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLease(time.Second), rwlock.WithLogger(nil))
				o, rGot, wGot, open := expiredWriteQueue(t, srv, name, holder, func() error { return holder.LockContext(ctx) })
				gb := fake.NewGated(t, fake.FakeBackend(t, srv))
				gctx, cancel := context.WithCancel(ctx)
				defer cancel()
				g := rwlock.New(gb, name, rwlock.WithLogger(nil))
				gGot := make(chan error, 1)
				go func() {
					if role == "reader" {
						gGot <- g.RLockContext(gctx)
					} else {
						gGot <- g.LockContext(gctx)
					}
				}()
				synctest.Wait()
				gb.HoldEvals()
				time.Sleep(1100 * time.Millisecond)
				// The give-up's attempt, held up, is cut off; its abandon
				// waits at the gate, and goes alone.
				cancel()
				if err := within(t, gGot, "the give-up"); err == nil {
					t.Fatal("the waiter that gave up acquired")
				}
				synctest.Wait()
				gb.OpenEvals()
				synctest.Wait()
				if st := state(t, ctx, holder); st.Mode == rwlock.Write || st.WaitingWriters != 1 || st.Readers+st.WaitingReaders != 1 {
					t.Errorf("after the give-up's abandon, past the write hold's lease: %+v; want the reader handed the lock (or waiting), the writer queued", st)
				}
				readerHandedFirst(t, o, rGot, wGot, open)
			})
		})
	}
}

// TestExpiredDowngradedWriteReadReleaseHandsReadersFirst: the write hold,
// on a fixed lease, was downgraded (its owner took a read hold behind it)
// and ran out; the first script to find it ended is the owner's read
// release, which passed the lock on as a read release does: to the queued
// writer, ahead of the reader that waited out the write hold.
func TestExpiredDowngradedWriteReadReleaseHandsReadersFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "downrelease"
		b := fake.FakeBackend(t, srv)
		w := rwlock.New(b, name, rwlock.WithLease(time.Second), rwlock.WithLogger(nil))
		r := rwlock.New(b, name, rwlock.WithLogger(nil)) // renewed every 10s: not before the release
		own := dsync.WithOwner(ctx)
		o, rGot, wGot, open := expiredWriteQueue(t, srv, name, w, func() error {
			if err := w.LockContext(own); err != nil {
				return err
			}
			return r.RLockContext(own)
		})
		time.Sleep(1100 * time.Millisecond)
		if err := r.RUnlockContext(own); err != nil {
			t.Fatal(err)
		}
		if st := state(t, ctx, w); st.Mode == rwlock.Write || st.WaitingWriters != 1 || st.Readers+st.WaitingReaders != 1 {
			t.Errorf("after the downgraded read hold's release, past the write hold's lease: %+v; want the reader handed the lock (or waiting), the writer queued", st)
		}
		readerHandedFirst(t, o, rGot, wGot, open)
	})
}

// TestExpiredDowngradedWriteRenewalKeepsReadersFirst: as above, but the
// first script to find the write hold ended is a renewal of the owner's
// read hold, which rewrote the lock's main key in the shared form: the
// mark of a write hold that ran out was gone, and no later script passed
// the lock on as its release would have. The reader, once it tried again,
// waited behind the queued writer.
func TestExpiredDowngradedWriteRenewalKeepsReadersFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "downrenew"
		b := fake.FakeBackend(t, srv)
		w := rwlock.New(b, name, rwlock.WithLease(time.Second), rwlock.WithLogger(nil))
		r := rwlock.New(b, name, rwlock.WithWatchdog(600*time.Millisecond), rwlock.WithLogger(nil))
		own := dsync.WithOwner(ctx)
		o, rGot, wGot, open := expiredWriteQueue(t, srv, name, w, func() error {
			if err := w.LockContext(own); err != nil {
				return err
			}
			return r.RLockContext(own)
		})
		// Renewals every 200ms, some of them past the write hold's end.
		time.Sleep(1500 * time.Millisecond)
		select {
		case <-r.RDone(own):
			t.Fatal("the downgraded read hold was lost")
		default:
		}
		// The waiters try again: the reader goes first, as it would have
		// had the write hold been released.
		open()
		synctest.Wait()
		// The reader, in beside the owner's read hold, has let go at once.
		if got, st := o.order(), state(t, ctx, w); len(got) != 1 || st.WaitingWriters != 1 {
			t.Errorf("the waiters having tried again past the write hold's lease: held in the order %v, %+v; want the reader in, the writer queued", got, st)
		}
		if err := r.RUnlockContext(own); err != nil {
			t.Fatal(err)
		}
		readerHandedFirst(t, o, rGot, wGot, func() {})
	})
}
