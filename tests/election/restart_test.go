package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// The server restarts without persistence while a leader leads, a
// candidate waits and an observer watches: the leader is told as its
// connection comes back, the candidate leads (its heartbeat queues it
// again) with a greater token, and the observer sees the lapse and then
// the new leader.
func TestServerRestartEndsTheTermAndTheNextLeads(t *testing.T) {
	srv := testserver.Real(t)
	if !srv.Restartable() {
		t.Skip("the server at $DSYNC_REDIS_ADDR is not ours to restart")
	}
	const timeout = 600 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	open := func() *election.Election {
		return election.New(srv.NewBackend(t), "restart", election.WithPrefix(p), election.WithWaiterTimeout(timeout),
			election.WithLogger(nil))
	}
	leader := open()
	term, err := leader.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	tok := mustToken(t, term) // while the term is on (see Term.Token)
	next := campaign(ctx, open(), "b")
	awaitQueued(t, ctx, leader, 1)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	w := &watcher{c: open().Observe(octx)}
	if l := w.next(t, time.Second, "a"); l.Value != "a" {
		t.Fatalf("observed %+v", l)
	}

	restarted := time.Now()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	closes(t, term.Done(), 5*time.Second, "the leader's Done after the restart")
	told := time.Since(up)
	r := receive(t, next, 5*time.Second, "the candidate")
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.term.Resign(ctx)
	if mustToken(t, r.term) <= tok {
		t.Errorf("token %d after %d", mustToken(t, r.term), tok)
	}
	// The observer sees the lapse unless the candidate led before it
	// read the state again; then the new leader.
	l := w.next(t, 5*time.Second, "after the restart")
	if l.IsZero() {
		l = w.next(t, 5*time.Second, "b")
	}
	if l.Value != "b" || l.Token != mustToken(t, r.term) {
		t.Errorf("observed %+v; want b with token %d (saw %v)", l, mustToken(t, r.term), w.seen)
	}
	t.Logf("restart took %v; the leader was told %v after the server was back, the candidate led %v after",
		up.Sub(restarted), told, r.at.Sub(up))
	if err := term.Resign(ctx); err == nil {
		t.Error("Resign of the term lost in the restart succeeded")
	}
}
