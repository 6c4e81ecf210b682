package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// TestRuntimeCapacityFromEarlierVersionBinds: a capacity set at runtime
// is kept without expiry, so it outlives a deploy. Versions before the
// plain acquisition (up to cbb9f1f) kept it on a free semaphore as the
// capacity key alone, with no state, as their doc said ("a free semaphore
// keeps none of its keys but the runtime capacity"). After the upgrade it
// must still bound every handle: a lone holder's acquisition above it is
// refused, as the acquire script of those versions refused it after
// finding the capacity key.
func TestRuntimeCapacityFromEarlierVersionBinds(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "earlier-" + dsync.NewID()[:8]
	key := "dsync:semaphore:{" + name + "}"
	// What SetCapacity(ctx, 1) of those versions left on a free semaphore.
	if _, err := srv.Do(ctx, "SET", key+":capacity", "1"); err != nil {
		t.Fatal(err)
	}
	sem := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLogger(nil))
	if c, err := sem.Capacity(ctx); err != nil || c != 1 {
		t.Fatalf("Capacity = %d, %v; want 1, the capacity set at runtime", c, err)
	}
	ok, err := sem.TryAcquire(ctx, 2)
	if ok {
		sem.Release(ctx, 2)
	}
	if ok || !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("TryAcquire(2) on a free semaphore whose capacity was set to 1 at runtime by an earlier version = %v, %v; want ErrInvalidPermits", ok, err)
	}
	srv.Do(ctx, "DEL", key, key+":holders", key+":capacity")
}
