package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// election/doc.go (Keys): "If the term's key is deleted or evicted behind
// dsync's back while candidates are queued, one newcomer may lead ahead of
// them before a candidate's next heartbeat writes the key back." One, not
// every newcomer until then: the first newcomer's term, once it ends,
// leaves the queued candidate its turn (the next Campaign queues behind
// it), and the candidate leads without waiting for its heartbeat.
//
// The candidate beats every 10s (a 30s waiter timeout), so nothing of its
// own writes the key back within the test.
func TestOneNewcomerLeadsAheadAfterTermKeyDeleted(t *testing.T) {
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
	c := open(election.WithWaiterTimeout(30 * time.Second))
	queued := campaign(cctx, c, "candidate")
	awaitQueued(t, ctx, c, 1)

	// Behind the election's back.
	if n, err := srv.Do(ctx, "DEL", key); err != nil || n != int64(1) {
		t.Fatalf("DEL %s = %v, %v", key, n, err)
	}

	first, ok, err := open().TryCampaign(ctx, "newcomer 1")
	if err != nil {
		t.Fatal(err)
	}
	if ok { // allowed, once
		if err := first.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	second, ok, err := open().TryCampaign(ctx, "newcomer 2")
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		st, _ := c.State(ctx)
		_ = second.Resign(ctx)
		t.Errorf("a second newcomer led ahead of the queued candidate after the term's key was deleted (State then: %+v); want at most one", st)
	}
	// The candidate leads well before its next heartbeat.
	select {
	case r := <-queued:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if err := r.term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		st, _ := c.State(ctx)
		t.Errorf("the queued candidate still waits 2s after the newcomers' terms ended (State: %+v); its heartbeat is 10s away", st)
	}
}
