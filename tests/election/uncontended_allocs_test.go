package election_test

import (
	"context"
	"testing"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// An uncontended Campaign+Resign makes at most 25 allocations over redigo
// (DESIGN.md §7's bound for every primitive's pair; 33 before a campaign
// and its term were one allocation, with the hook on its lease's end, its
// owner made with its hold id, its channels made when asked for, and an
// array reply normalized in place).
// The client's own allocations (redigo's pool and reply decoding) count
// too. The calls take context.Background(): a deadline's timer and
// context are the caller's allocations.
func TestUncontendedPairAllocations(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	pair := uncontendedPair(t, ctx, election.New(srv.NewBackend(t), "allocs", election.WithPrefix(prefix())))
	n := testing.AllocsPerRun(200, pair)
	if n > 25 {
		t.Errorf("%.1f allocations per uncontended Campaign+Resign; want at most 25", n)
	}
	t.Logf("%.1f allocations per pair", n)
}
