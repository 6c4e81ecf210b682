package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

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
		const name = "wdeleted-release"
		var readers []*rwlock.RWMutex
		for range 2 {
			r := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil))
			if err := r.RLockContext(ctx); err != nil {
				t.Fatal(err)
			}
			readers = append(readers, r)
		}
		srv.Del(key("dsync", name))
		w := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil))
		if ok, err := w.TryLockContext(ctx); err != nil || !ok {
			t.Fatalf("a plain writer's TryLock with the main key deleted = %v, %v; want true (the move documented)", ok, err)
		}
		for i, r := range readers {
			if err := r.RUnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("reader %d's RUnlock beside the writer's hold: %v, want an error matching ErrNotHeld", i, err)
			}
		}
		if err := w.UnlockContext(ctx); err != nil {
			t.Errorf("the writer's Unlock: %v", err)
		}
	})
}
