package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// election/doc.go (Keys): once the term's key is deleted behind dsync's
// back while a candidate is queued, newcomers may lead ahead of it only
// until the candidate's next heartbeat writes the key back. Newcomers
// campaign and resign in a loop from the deletion on; the candidate, which
// beats every 300ms, must lead within its heartbeat and a margin, and no
// newcomer may lead once it queued behind the candidate's key again.
func TestNewcomersLeadAheadOnlyUntilAHeartbeatAfterTermKeyDeleted(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	const name = "deleted-term"
	key := p + ":election:{" + name + "}"
	open := func(opts ...election.Option) *election.Election {
		return election.New(srv.NewBackend(t), name, append(opts, election.WithPrefix(p), election.WithLogger(nil))...)
	}
	leader, err := open().Campaign(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Resign(ctx)
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	const beat = 300 * time.Millisecond // a third of the waiter timeout
	c := open(election.WithWaiterTimeout(3 * beat))
	queued := campaign(cctx, c, "candidate")
	awaitQueued(t, ctx, c, 1)

	// Behind the election's back.
	if n, err := srv.Do(ctx, "DEL", key); err != nil || n != int64(1) {
		t.Fatalf("DEL %s = %v, %v", key, n, err)
	}
	deleted := time.Now()
	newcomer := open()
	led := 0
	for i := 0; ; i++ {
		select {
		case r := <-queued:
			if r.err != nil {
				t.Fatal(r.err)
			}
			t.Logf("the candidate led %v after the deletion; %d newcomers led before it", time.Since(deleted).Round(time.Millisecond), led)
			if _, ok, err := newcomer.TryCampaign(ctx, "late newcomer"); err != nil || ok {
				t.Errorf("a newcomer's TryCampaign while the candidate leads = %v, %v; want false", ok, err)
			}
			if err := r.term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		// A loaded machine may hold the candidate's beat up: a bound of
		// several beats still fails a candidate that waits for newcomers
		// to stop.
		if time.Since(deleted) > 10*beat || i > 100000 {
			st, _ := c.State(ctx)
			t.Fatalf("the queued candidate did not lead within %v of the deletion while %d newcomers led (State: %+v)", 10*beat, led, st)
		}
		term, ok, err := newcomer.TryCampaign(ctx, "newcomer")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			led++
			if err := term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
