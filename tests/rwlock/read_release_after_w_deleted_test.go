package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestReadReleaseAfterWDeletedFails: readers hold, the lock's main key
// alone is deleted behind dsync's back (or evicted) and a plain writer
// takes it. A reader that releases before its next renewal must learn
// then that its read hold was lost (ErrNotHeld), as its renewal would
// have: a release that succeeded told it nothing, and the eviction soak
// saw a reader and a writer overlap with neither told.
func TestReadReleaseAfterWDeletedFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		readers, w := readersLostToAPlainWriter(t, ctx, srv, "wdeleted-release")
		readersToldThenWriterUnlocks(t, ctx, readers, w)
	})
}

// TestLostReadersDoNotOutliveAWriteHold: readers hold, the main key alone
// is deleted behind dsync's back, a plain writer takes it, and a second
// writer queues behind it. The first writer's release must hand the lock
// to the second at once, and the readers must be told their holds were
// lost: a release that found the read holds still in their keys had
// written the lock back as shared, the readers' renewals and releases
// then succeeded, never told that a writer had held the lock beside them,
// and the queued writer waited for them.
//
// With the readers' hash evicted too, the read holds left in their expiry
// set must not hold the second writer up either.
func TestLostReadersDoNotOutliveAWriteHold(t *testing.T) {
	t.Run("main key deleted", func(t *testing.T) { testLostReadersDoNotOutliveAWriteHold(t) })
	t.Run("readers hash deleted too", func(t *testing.T) { testLostReadersDoNotOutliveAWriteHold(t, ":readers") })
}

func testLostReadersDoNotOutliveAWriteHold(t *testing.T, alsoDeleted ...string) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "wdeleted-writers"
		readers, first := readersLostToAPlainWriter(t, ctx, srv, name, alsoDeleted...)
		second := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil))
		locked := make(chan error, 1)
		go func() { locked <- second.LockContext(ctx) }()
		synctest.Wait()
		select {
		case err := <-locked:
			t.Fatalf("the second writer's Lock returned %v while the first writer holds the lock", err)
		default:
		}
		if err := first.UnlockContext(ctx); err != nil {
			t.Fatalf("the first writer's Unlock: %v", err)
		}
		synctest.Wait()
		select {
		case err := <-locked:
			if err != nil {
				t.Fatalf("the second writer's Lock: %v", err)
			}
		default:
			t.Fatal("the second writer still waits after the first writer's Unlock: the lost read holds held it up")
		}
		readersToldThenWriterUnlocks(t, ctx, readers, second)
	})
}

// TestStateCountsNoLostReaders: State must not report the lost read holds
// beside the plain writer's hold, a state the lock never allows, which the
// next script of any holder undoes: it drops them (see
// TestLostReadersDoNotOutliveAWriteHold).
func TestStateCountsNoLostReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		readers, w := readersLostToAPlainWriter(t, ctx, srv, "wdeleted-state")
		s, err := readers[0].State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Mode != rwlock.Write || s.Readers != 0 || s.ReadCount != 0 {
			t.Errorf("State beside the plain writer's hold: mode %v, %d readers, the reader's count %d; want the write mode, 0, 0", s.Mode, s.Readers, s.ReadCount)
		}
		readersToldThenWriterUnlocks(t, ctx, readers, w)
	})
}

// readersLostToAPlainWriter has two readers take name's read lock, deletes
// its main key alone (or with the keys of the given suffixes), as an
// eviction may, and has a plain writer take the lock then (the move
// documented). It returns the readers and the writer.
func readersLostToAPlainWriter(t *testing.T, ctx context.Context, srv *miniredis.Miniredis, name string, alsoDeleted ...string) ([]*rwlock.RWMutex, *rwlock.RWMutex) {
	t.Helper()
	var readers []*rwlock.RWMutex
	for range 2 {
		r := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil))
		if err := r.RLockContext(ctx); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	srv.Del(key("dsync", name))
	for _, suffix := range alsoDeleted {
		if !srv.Del(key("dsync", name) + suffix) {
			t.Fatalf("no key %s to delete", key("dsync", name)+suffix)
		}
	}
	w := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil))
	if ok, err := w.TryLockContext(ctx); err != nil || !ok {
		t.Fatalf("a plain writer's TryLock with the main key deleted = %v, %v; want true (the move documented)", ok, err)
	}
	return readers, w
}

// readersToldThenWriterUnlocks checks that each of the lost readers'
// RUnlock fails with ErrNotHeld, a writer having held the lock beside
// them, and that the writer w holding it now unlocks.
func readersToldThenWriterUnlocks(t *testing.T, ctx context.Context, readers []*rwlock.RWMutex, w *rwlock.RWMutex) {
	t.Helper()
	for i, r := range readers {
		if err := r.RUnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("reader %d's RUnlock after a writer held the lock beside it: %v, want an error matching ErrNotHeld", i, err)
		}
	}
	if err := w.UnlockContext(ctx); err != nil {
		t.Errorf("the writer's Unlock: %v", err)
	}
}
