package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// ForceUnlock counts only holds that are live: a read hold whose expiry
// entry vanished (the rexpiry key deleted, or evicted by maxmemory) is
// lost, its holder told (RDone), and the lock reads as free; a later
// ForceUnlock reports that it took nothing, instead of the lost readers'
// leftover entries in the readers hash. Two readers hold: a lone read
// hold is the lock's main key, and has no entry in rexpiry.
func TestForceUnlockTakesNoLostReader(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const lease = 600 * time.Millisecond
	p := prefix(t)
	reader := rwlock.New(srv.NewBackend(t), "lostreader", rwlock.WithPrefix(p), rwlock.WithWatchdog(lease), rwlock.WithLogger(nil))
	admin := rwlock.New(srv.NewBackend(t), "lostreader", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
	o, o2 := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	if err := reader.RLockContext(o); err != nil {
		t.Fatal(err)
	}
	if err := reader.RLockContext(o2); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "DEL", p+":rwlock:{lostreader}:rexpiry"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []context.Context{o, o2} {
		select {
		case <-reader.RDone(o):
		case <-time.After(lease):
			t.Fatal("a reader not told of its lost hold within the lease")
		}
	}
	st, err := admin.State(ctx)
	if err != nil || st.Readers != 0 || st.Mode != rwlock.Free {
		t.Fatalf("state after the reader's loss: %+v, %v; want free", st, err)
	}
	took, err := admin.ForceUnlock(ctx)
	if err != nil || took {
		t.Fatalf("ForceUnlock of a free lock = %v, %v; want false: the lost reader's leftover is no hold", took, err)
	}
}
