package fault

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
)

// A lock key turned into another type behind its holder's back (a hash:
// every script touching it fails with WRONGTYPE) costs only its own hold,
// on a real server: the other holds renewed in the same batch, on the same
// backend, survive several leases, and the poisoned hold's Done closes
// within the lease.
func TestPoisonedKeyCostsOnlyItsHold(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	const (
		n     = 10
		lease = 600 * time.Millisecond
	)
	ctx := dsync.WithOwner(context.Background())
	ms := make([]*mutex.Mutex, n)
	for i := range ms {
		ms[i] = mutex.New(b, fmt.Sprintf("poison:%d", i), mutex.WithWatchdog(lease), mutex.WithLogger(nil))
		if err := ms[i].LockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	key := "dsync:mutex:{poison:0}"
	if _, err := do(ctx, srv.Addr(), "DEL", key); err != nil {
		t.Fatal(err)
	}
	poisoned := time.Now()
	if _, err := do(ctx, srv.Addr(), "HSET", key, "f", "v"); err != nil {
		t.Fatal(err)
	}
	var told time.Duration
	select {
	case <-ms[0].Done(ctx):
		told = time.Since(poisoned)
	case <-time.After(2 * lease):
		t.Fatalf("the hold whose key became a hash still open %v later", 2*lease)
	}
	// Several renewal cycles (a third of the lease each) for the others.
	time.Sleep(4 * lease)
	lost := 0
	for i := 1; i < n; i++ {
		select {
		case <-ms[i].Done(ctx):
			lost++
		default:
		}
		if err := ms[i].UnlockContext(ctx); err != nil {
			t.Errorf("unlock %d: %v", i, err)
		}
	}
	t.Logf("one key of %d turned into a hash: its hold told after %v (lease %v); healthy holds lost over %v: %d of %d",
		n, told.Round(time.Millisecond), lease, 4*lease, lost, n-1)
	if lost > 0 {
		t.Errorf("%d of %d healthy holds lost with the poisoned key's; want 0", lost, n-1)
	}
}
