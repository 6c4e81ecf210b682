package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// A candidate that queued behind a fixed-lease term and gave up (its
// abandon ran) leaves nobody queued; once that term runs out the election
// is free, and the term's key must be gone: the key outlives an ended
// term only while candidates are queued, and then the next Campaign takes
// the fast path.
func TestEndedTermKeyVanishesOnceNoCandidateIsQueued(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	key := p + ":election:{ended}"
	const lease = 300 * time.Millisecond
	leader := election.New(srv.NewBackend(t), "ended", election.WithPrefix(p), election.WithLease(lease), election.WithLogger(nil))
	if _, err := leader.Campaign(ctx, "leader"); err != nil {
		t.Fatal(err)
	}
	c := election.New(srv.NewBackend(t), "ended", election.WithPrefix(p), election.WithWaiterTimeout(5*time.Second), election.WithLogger(nil))
	cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := c.Campaign(cctx, "candidate")
	ccancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the candidate's Campaign: %v; want its deadline", err)
	}
	if st, err := leader.State(ctx); err != nil || st.Leader.Value != "leader" || st.Queued != 0 {
		t.Fatalf("State once the candidate gave up = %+v, %v; want the leader, nobody queued", st, err)
	}
	// Time is what is tested: the term's lease runs out by itself.
	time.Sleep(lease + 200*time.Millisecond)
	if st, err := leader.State(ctx); err != nil || !st.Leader.IsZero() {
		t.Fatalf("State past the lease = %+v, %v; want no leader", st, err)
	}
	n, err := srv.Do(ctx, "EXISTS", key)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(0) {
		v, _ := srv.Do(ctx, "GET", key)
		ttl, _ := srv.Do(ctx, "PTTL", key)
		t.Errorf("the term's key past its end, nobody queued: %q, PTTL %v ms; want it gone", v, ttl)
	}
}
