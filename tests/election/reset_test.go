package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// setRev writes rev ARGV[1] into the leader state at KEYS[1], the string
// "<rev> <id> <token> <began> <value>" (see election/lua/term.lua).
var setRev = backend.NewScript(`local v = redis.call('GET', KEYS[1])
return redis.call('SET', KEYS[1], ARGV[1] .. string.match(v, '^%d+( .*)$'), 'KEEPTTL')`)

// Observers order states by a number the server keeps with them, seeded
// from its clock when lost. A server that lost the election's keys and
// whose clock is behind the numbers observers saw (a failover to a
// replica whose clock lags, a restart without persistence) numbers its
// states lower than those: after the reconnection, observers follow it
// all the same, from the state they read then.
func TestObserversFollowAServerThatLostItsKeys(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	b := srv.NewBackend(t)
	e := election.New(b, "reset", election.WithPrefix(p))
	octx, stop := context.WithCancel(ctx)
	defer stop()
	w := &watcher{c: election.New(srv.NewBackend(t), "reset", election.WithPrefix(p)).Observe(octx)}

	term, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if l := w.next(t, time.Second, "a"); l.Value != "a" {
		t.Fatalf("observed %+v", l)
	}
	// The numbers of a server whose clock ran far ahead.
	k := p + ":election:{reset}"
	if _, err := b.Eval(ctx, setRev, []string{k + ":leader"}, "4000000000000000"); err != nil {
		t.Fatal(err)
	}
	if err := term.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	if l := w.next(t, time.Second, "a2"); l.Value != "a2" {
		t.Fatalf("observed %+v", l)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if l := w.next(t, time.Second, "the lapse"); !l.IsZero() {
		t.Fatalf("observed %+v", l)
	}
	// The keys are lost, and the connections with them.
	if _, err := b.Eval(ctx, delKeys, []string{k, k + ":leader"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.KillPubSub(ctx); err != nil {
		t.Fatal(err)
	}
	// Whether the campaign's message or the read after the reconnection
	// tells them, observers see the new leader.
	term, err = e.Campaign(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)
	if l := w.next(t, 5*time.Second, "b after the keys were lost"); l.Value != "b" {
		t.Fatalf("observed %+v; want b", l)
	}
}
