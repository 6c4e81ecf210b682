package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/internal/tripmeter"
)

// While the server is stalled (DEBUG SLEEP), every call keeps its ctx's
// deadline: Campaign returns within half a second of it, Resign and
// Proclaim within 100ms, an observer's channel closes when its ctx ends;
// once the server is back, the resignation that went on in the background
// hands over, and the Campaign that gave up left nothing queued.
func TestStalledServerKeepsDeadlines(t *testing.T) {
	const pause, deadline = 1500 * time.Millisecond, 200 * time.Millisecond
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	open := func() *election.Election {
		return election.New(srv.NewBackend(t), "stall", election.WithPrefix(p), election.WithLogger(nil))
	}
	leader := open()
	term, err := leader.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	next := campaign(ctx, open(), "b")
	awaitQueued(t, ctx, leader, 1)
	octx, stop := context.WithCancel(ctx)
	w := open().Observe(octx)
	receive(t, w, time.Second, "the observer's first state")
	quitter := open()
	// One connection of each backend is up before the pause, as is the
	// subscription: the calls below reach the stalled server.
	if _, err := quitter.Leader(ctx); err != nil {
		t.Fatal(err)
	}

	paused := make(chan error, 1)
	go func() { paused <- srv.Pause(context.Background(), pause) }()
	time.Sleep(50 * time.Millisecond) // the DEBUG SLEEP reaches the server

	check := func(what string, limit time.Duration, f func(ctx context.Context) error) {
		t.Helper()
		dctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		held := tripmeter.Start(t, ctx, nil)
		start := time.Now()
		err := f(dctx)
		took := time.Since(start)
		stall := held.Stop()
		t.Logf("%s with a %v deadline on a stalled server: %v after %v (the process held up %v at most)", what, deadline, err, took.Round(time.Millisecond), stall)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v; want context.DeadlineExceeded", what, err)
		}
		// And 50ms for scheduling, as the fault suite allows, or as long
		// as the machine held up the test's process meanwhile.
		if took > deadline+limit+max(50*time.Millisecond, stall) {
			t.Errorf("%s returned %v after the call; want within %v + %v (the process held up %v at most)", what, took, deadline, limit, stall)
		}
	}
	check("Campaign", 500*time.Millisecond, func(ctx context.Context) error {
		_, err := quitter.Campaign(ctx, "quitter")
		return err
	})
	check("Proclaim", 100*time.Millisecond, func(ctx context.Context) error { return term.Proclaim(ctx, "a2") })
	check("Resign", 100*time.Millisecond, term.Resign)
	stopped := time.Now()
	stop()
	for {
		select {
		case _, ok := <-w:
			if ok {
				continue
			}
		case <-time.After(time.Second):
			t.Fatal("the observer's channel is open a second after its ctx ended")
		}
		break
	}
	t.Logf("the observer's channel closed %v after its ctx ended", time.Since(stopped).Round(time.Millisecond))
	if err := <-paused; err != nil {
		t.Fatal(err)
	}

	r := receive(t, next, 5*time.Second, "the candidate after the pause")
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.term.Resign(ctx)
	st, err := leader.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader.Value != "b" || st.Queued != 0 {
		t.Errorf("after the pause: %+v; want b leading, nobody queued", st)
	}
}
