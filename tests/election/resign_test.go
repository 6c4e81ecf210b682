package election_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/tripmeter"
)

// Resign hands the term to the queued candidate of another process (by
// pub/sub) within 50ms, every time.
func TestResignHandsOverWithin50ms(t *testing.T) {
	const rounds = 50
	srv := servers(true)["redis"](t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	a := election.New(srv.NewBackend(t), "resign", election.WithPrefix(p))
	b := election.New(srv.NewBackend(t), "resign", election.WithPrefix(p))
	term, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Round trips timed meanwhile show how long the machine held up any
	// exchange with the server: the bound allows for that.
	trips := tripmeter.Start(t, context.Background(), srv.NewBackend(t))
	var took []time.Duration
	for i := range rounds {
		next := a
		if i%2 == 0 {
			next = b
		}
		got := campaign(ctx, next, "x")
		awaitQueued(t, ctx, next, 1)
		resigned := time.Now()
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		r := receive(t, got, 5*time.Second, "the next candidate")
		if r.err != nil {
			t.Fatal(r.err)
		}
		took = append(took, r.at.Sub(resigned))
		term = r.term
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	slow := trips.Stop()
	slices.Sort(took)
	t.Logf("Resign to the next leader's Campaign returning, %d hand-overs: p50 %v, p90 %v, max %v; longest round trip meanwhile %v",
		rounds, took[rounds/2], took[rounds*9/10], took[rounds-1], slow)
	if took[rounds-1] > 50*time.Millisecond+3*slow {
		t.Errorf("slowest hand-over %v; want within 50ms, and %v more for the longest round trip timed meanwhile, three times", took[rounds-1], slow)
	}
}

// A Campaign whose ctx ends while it is queued returns the ctx's error and
// leaves nothing on the server: no place in the queue, no value, and the
// next Resign finds nobody to hand over to.
func TestCancelledCampaignLeavesNothingQueued(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			leader := election.New(srv.NewBackend(t), "cancel", election.WithPrefix(p))
			term, err := leader.Campaign(ctx, "leader")
			if err != nil {
				t.Fatal(err)
			}
			for _, how := range []string{"deadline", "cancel"} {
				cctx, stop := context.WithTimeout(ctx, 150*time.Millisecond)
				e := election.New(srv.NewBackend(t), "cancel", election.WithPrefix(p))
				got := campaign(cctx, e, "quitter")
				if how == "cancel" {
					awaitQueued(t, ctx, leader, 1)
					stop()
				}
				r := receive(t, got, 5*time.Second, "the cancelled Campaign")
				stop()
				if !errors.Is(r.err, cctx.Err()) || r.term != nil {
					t.Fatalf("%s: Campaign returned %v, %v; want the ctx's error %v", how, r.term, r.err, cctx.Err())
				}
				st, err := leader.State(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if st.Queued != 0 || len(st.Candidates) != 0 {
					t.Fatalf("%s: after the Campaign returned: %+v; want nobody queued", how, st)
				}
			}
			if err := term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := leader.Leader(ctx); !errors.Is(err, dsync.ErrNoLeader) {
				t.Fatalf("after the only leader resigned: %v; want ErrNoLeader", err)
			}
		})
	}
}

// A resigned or lost term's Proclaim and Resign are ErrNotHeld.
func TestEndedTermNotHeld(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			e := election.New(srv.NewBackend(t), "ended", election.WithPrefix(p), election.WithWatchdog(300*time.Millisecond))

			resigned, err := e.Campaign(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if err := resigned.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			notHeld(t, resigned.Proclaim(ctx, "x"), "Proclaim after Resign")
			notHeld(t, resigned.Resign(ctx), "Resign after Resign")

			// Lost by ForceResign: its Done closes at once in this
			// process, at the next renewal in another.
			lost, err := e.Campaign(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}
			other := election.New(srv.NewBackend(t), "ended", election.WithPrefix(p))
			if ok, err := other.ForceResign(ctx); !ok || err != nil {
				t.Fatalf("ForceResign: %v, %v", ok, err)
			}
			closes(t, lost.Done(), time.Second, "Done of the forced term")
			notHeld(t, lost.Proclaim(ctx, "x"), "Proclaim after a loss")
			notHeld(t, lost.Resign(ctx), "Resign after a loss")

			// Lost on a fixed lease that ran out.
			short := election.New(srv.NewBackend(t), "ended", election.WithPrefix(p), election.WithLease(100*time.Millisecond))
			expired, err := short.Campaign(ctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			closes(t, expired.Done(), time.Second, "Done of the expired term")
			time.Sleep(20 * time.Millisecond) // past the margin
			notHeld(t, expired.Proclaim(ctx, "x"), "Proclaim after the lease ran out")
			notHeld(t, expired.Resign(ctx), "Resign after the lease ran out")
		})
	}
}
