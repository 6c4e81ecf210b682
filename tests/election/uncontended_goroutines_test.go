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
	e := election.New(srv.NewBackend(t), "goroutines", election.WithPrefix(prefix()))
	pair := func() {
		term, err := e.Campaign(ctx, "host-a:8080")
		if err != nil {
			t.Fatal(err)
		}
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair() // loads the scripts and joins the wake channel
	before := goroutinesCreated()
	for range pairs {
		pair()
	}
	// The count is the process's: a test's clean-up elsewhere may start
	// a few, never one per pair.
	if n := goroutinesCreated() - before; n > pairs/5 {
		t.Errorf("%d goroutines started in %d uncontended Campaign+Resign pairs; want none per pair", n, pairs)
	}
}

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
