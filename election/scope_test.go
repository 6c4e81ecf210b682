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

// scopeLease is the watchdog lease of the scope tests: a deleted term is
// found at the next renewal, a third of it later, plus a round trip.
const scopeLease = 600 * time.Millisecond

// TestCampaignScopeEndsWhenKeyDeleted: the term's key deleted behind the
// leader's back ends the scope's context within the lost-signal bound,
// with a cause matching dsync.ErrNotHeld that says the term vanished.
func TestCampaignScopeEndsWhenKeyDeleted(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	name := "scope:" + dsync.NewID()[:8]
	e := election.New(srv.NewBackend(t), name, election.WithWatchdog(scopeLease), election.WithLogger(nil))
	ctx, resign, err := e.CampaignScope(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	term := election.TermOf(ctx)
	if term == nil {
		t.Fatal("TermOf(the scope's context) = nil, want the term")
	}
	if tok, err := term.Token(ctx); err != nil || tok <= 0 {
		t.Fatalf("the scope's term: Token = %d, %v; want a token", tok, err)
	}
	t0 := time.Now()
	if _, err := srv.Do(context.Background(), "DEL", "dsync:election:{"+name+"}"); err != nil {
		t.Fatal(err)
	}
	bound := scopeLease/3 + 200*time.Millisecond
	took := testserver.ScopeLost(t, ctx, t0, bound, "the term was lost (hold no longer on the server)")
	t.Logf("scope ended %v after the DEL (bound %v): %v", took.Round(time.Millisecond), bound, context.Cause(ctx))
	if err := resign(); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("resign after the loss: %v, want ErrNotHeld", err)
	}
}

// TestCampaignScopeResigned: resign ends the scope's context with
// context.Canceled before it returns, and the next candidate leads.
func TestCampaignScopeResigned(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	name := "scope:" + dsync.NewID()[:8]
	ctx, resign, err := election.New(srv.NewBackend(t), name).CampaignScope(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan *election.Term, 1)
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		term, err := election.New(srv.NewBackend(t), name).Campaign(cctx, "b")
		if err != nil {
			t.Error(err)
		}
		next <- term
	}()
	if err := resign(); err != nil {
		t.Fatal(err)
	}
	testserver.ScopeReleased(t, ctx)
	if term := <-next; term != nil {
		term.Resign(cctx)
	}
	if err := resign(); err != nil {
		t.Errorf("second resign: %v, want the first's nil", err)
	}
	if election.TermOf(context.Background()) != nil {
		t.Error("TermOf a context without a term is not nil")
	}
}
