package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// An uncontended Campaign+Resign costs 5 server commands, scripts' inner
// calls included (16 before the fast path, 12 before the plain campaign):
// Campaign's SET NX and its hint's PUBLISH, in one round trip; Resign's
// script, which reads the term and deletes it. Nothing reads the term
// between them, so nothing converts it (see election/lua/term.lua).
func TestUncontendedPairCommands(t *testing.T) {
	const pairs = 100
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pair := uncontendedPair(t, ctx, election.New(srv.NewBackend(t), "pairs", election.WithPrefix(prefix())))
	by, sum, err := srv.FewestCalls(ctx, 1, func() {
		for range pairs {
			pair()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pairs: %.2f commands per pair: %v", pairs, float64(sum)/pairs, by)
	if sum > 5*pairs || by["set"] != pairs || by["publish"] != pairs || by["evalsha"] != pairs {
		t.Errorf("%v in %d uncontended Campaign+Resign pairs (%.2f per pair); want 5 per pair: SET, PUBLISH, EVALSHA (GET, DEL)", by, pairs, float64(sum)/pairs)
	}
	if by["zrange"] != 0 {
		t.Errorf("%d ZRANGEs: an uncontended Campaign looked at the queue", by["zrange"])
	}
}

// uncontendedPair returns a Campaign+Resign on e, after one that loads
// the scripts and joins the wake channel.
func uncontendedPair(t *testing.T, ctx context.Context, e *election.Election) func() {
	pair := func() {
		t.Helper()
		term, err := e.Campaign(ctx, "host-a:8080")
		if err != nil {
			t.Fatal(err)
		}
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair()
	return pair
}

// Resign with nobody queued deletes the term's key, the leader state
// keeping the last token, so that the next Campaign takes the fast path
// (one SET NX and the hint, no script) and, once drawn, a greater token.
func TestCampaignFastPathAfterResign(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	key := p + ":election:{fast}"
	e := election.New(srv.NewBackend(t), "fast", election.WithPrefix(p))
	term, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	first := mustToken(t, term)
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		key  string
		want int64
	}{{key, 0}, {key + ":leader", 1}} {
		if n, err := srv.Do(ctx, "EXISTS", k.key); err != nil || n != k.want {
			t.Errorf("EXISTS %s after Resign = %v, %v; want %d", k.key, n, err, k.want)
		}
	}
	// The value is the leader state's last field: any text.
	const value = "b 1 2\n3 "
	by, sum, err := srv.FewestCalls(ctx, 1, func() {
		if term, err = e.Campaign(ctx, value); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Campaign after Resign: %d commands: %v", sum, by)
	if sum != 2 || by["set"] != 1 || by["publish"] != 1 {
		t.Errorf("Campaign after Resign ran %v (%d commands); want the plain campaign: SET NX, PUBLISH", by, sum)
	}
	if mustToken(t, term) <= first {
		t.Errorf("token after Resign %d; want above the resigned term's %d", mustToken(t, term), first)
	}
	if l, err := e.Leader(ctx); err != nil || l.Value != value || l.Token != mustToken(t, term) || l.Began.IsZero() {
		t.Errorf("Leader = %+v, %v; want %q with token %d and its start", l, err, value, mustToken(t, term))
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
