package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// Every Campaign is a candidate of its own, whatever owner ctx carries: a
// second campaign with the leader's owner queues behind the leader rather
// than re-entering its term, and leads once the first resigns, with a
// term of its own.
func TestCampaignWithTheLeadersOwnerQueues(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), time.Minute)
	defer cancel()
	e := election.New(srv.NewBackend(t), "owner", election.WithPrefix(prefix()))
	first, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	firstToken := mustToken(t, first) // while the term is on (see Term.Token)
	if _, ok, err := e.TryCampaign(ctx, "b"); ok || err != nil {
		t.Fatalf("TryCampaign with the leader's owner = %v, %v; want not leading", ok, err)
	}
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	if _, err := e.Campaign(short, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign with the leader's owner: %v; want it to wait out its ctx", err)
	}
	second := make(chan *election.Term, 1)
	go func() {
		term, err := e.Campaign(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		second <- term
	}()
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	term := <-second
	if term == nil {
		return
	}
	if mustToken(t, term) <= firstToken || term.Value() != "b" {
		t.Errorf("the second campaign's term: token %d after %d, value %q; want a greater token and value b", mustToken(t, term), firstToken, term.Value())
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
