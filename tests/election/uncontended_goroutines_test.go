package election_test

import (
	"context"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// An uncontended Campaign+Resign starts no goroutine: the term learns of
// its end in the step that ends its lease, and only a lost term, which
// observers must be told of, starts one to announce it. Before, every
// Resign started a goroutine, about a tenth of the pair's client time.
func TestUncontendedPairStartsNoGoroutine(t *testing.T) {
	const pairs = 100
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pair := uncontendedPair(t, ctx, election.New(srv.NewBackend(t), "goroutines", election.WithPrefix(prefix())))
	// The count is the process's: another test's clean-up may start a
	// few meanwhile, never one per pair. The fewest of three rounds counts.
	fewest := uint64(1 << 63)
	for round := 0; round < 3 && fewest > pairs/5; round++ {
		before := goroutinesCreated()
		for range pairs {
			pair()
		}
		fewest = min(fewest, goroutinesCreated()-before)
	}
	if fewest > pairs/5 {
		t.Errorf("%d goroutines started in %d uncontended Campaign+Resign pairs, in the fewest of 3 rounds; want none per pair", fewest, pairs)
	}
}

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
