package election_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// A term taken by a plain campaign records when it began at its first
// read from its expiry, which only the conversion may trust: its renewals
// convert it first, so that its start stays the Campaign's however many
// renewals came before the first read.
func TestPlainTermKeepsItsStartAcrossRenewals(t *testing.T) {
	const lease = 300 * time.Millisecond
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := election.New(srv.NewBackend(t), "began", election.WithPrefix(prefix()), election.WithWatchdog(lease))
	before := time.Now()
	term, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)
	after := time.Now()
	// Two renewals (every lease/3) before anything reads the term.
	time.Sleep(lease * 5 / 6)
	l, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The server's clock is this machine's, read in ms.
	const slack = 30 * time.Millisecond
	if l.Began.Before(before.Add(-slack)) || l.Began.After(after.Add(slack)) {
		t.Errorf("Leader.Began %v after renewals: %v after the Campaign was called (it returned after %v); want its start",
			l.Began.Format("05.000"), l.Began.Sub(before), after.Sub(before))
	}
	if tok, err := term.Token(ctx); err != nil || tok != l.Token {
		t.Errorf("Token = %d, %v; want the token Leader read, %d", tok, err, l.Token)
	}
}

// Resign of a term that nothing read ends it without a word: the only
// message is the campaign's hint, the leader state is untouched, and the
// term never had a token, which Token says after the Resign.
func TestUnreadTermResignsSilently(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	const name = "silent"
	key := p + ":election:{" + name + "}"
	b := srv.NewBackend(t)
	e := election.New(b, name, election.WithPrefix(p))
	// A first term, read and resigned, leaves a leader state.
	first, err := e.Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	firstToken := mustToken(t, first)
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	state, err := srv.Do(ctx, "GET", key+":leader")
	if err != nil || state == nil {
		t.Fatalf("leader state after a resigned term: %v, %v", state, err)
	}
	sub, err := b.Subscribe(ctx, key+":observe")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	term, err := e.Campaign(ctx, "unread")
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := term.Token(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Token of a term resigned unread: %v; want ErrNotHeld", err)
	}
	if m := nextMessage(t, sub, time.Second); m != "term" {
		t.Errorf("first message %q; want the hint %q", m, "term")
	}
	if m := nextMessage(t, sub, 200*time.Millisecond); m != "" {
		t.Errorf("a message after the hint: %q; want none", m)
	}
	if now, err := srv.Do(ctx, "GET", key+":leader"); err != nil || fmt.Sprint(now) != fmt.Sprint(state) {
		t.Errorf("leader state after the unread term: %v, %v; want it unchanged, %v", now, err, state)
	}
	// The next term's token still follows the first's.
	next, err := e.Campaign(ctx, "next")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Resign(ctx)
	if tok := mustToken(t, next); tok != firstToken+1 {
		t.Errorf("token %d after %d and an unread term; want %d", tok, firstToken, firstToken+1)
	}
}

// nextMessage returns the next message's payload, or "" if none comes within
// d.
func nextMessage(t *testing.T, sub backend.Subscription, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		m, err := sub.Receive(ctx)
		switch {
		case err != nil:
			return ""
		case m.Gap:
			continue
		}
		return m.Payload
	}
}

// Through a backend without backend.SetPublisher, the acquire script
// takes the term as a plain campaign does, and publishes the hint: one
// script call, with its SET and PUBLISH.
func TestPlainCampaignWithoutSetPublisher(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := election.New(scriptOnly{srv.NewBackend(t)}, "script", election.WithPrefix(prefix()))
	pair := uncontendedPair(t, ctx, e)
	by, sum, err := srv.FewestCalls(ctx, 1, pair)
	if err != nil {
		t.Fatal(err)
	}
	if sum != 6 || by["evalsha"] != 2 || by["set"] != 1 || by["publish"] != 1 || by["get"] != 1 || by["del"] != 1 {
		t.Errorf("Campaign+Resign without SetPublisher ran %v (%d commands); want EVALSHA (SET NX, PUBLISH), EVALSHA (GET, DEL)", by, sum)
	}
	term, err := e.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)
	l, err := e.Leader(ctx)
	if err != nil || l.Value != "v" || l.Token != mustToken(t, term) {
		t.Errorf("Leader = %+v, %v; want v with the term's token", l, err)
	}
}
