package election_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/tripmeter"
)

// watcher is one observer, recording what it receives.
type watcher struct {
	c    <-chan election.Leader
	seen []election.Leader
}

// next waits for the watcher's next state and records it.
func (w *watcher) next(t *testing.T, d time.Duration, what string) election.Leader {
	t.Helper()
	l := receive(t, w.c, d, what)
	w.seen = append(w.seen, l)
	return l
}

// Three observers on separate backends follow 20 changes of leader and 10
// Proclaims: the first state within 10ms of Observe, each change within
// 50ms of the call that made it, all of them the same sequence, in order.
// A deletion of the election's keys ends the leader's term (Done) and
// observers see the lapse; when their ctx ends their channels close.
func TestObserversSeeEveryChangeInOrder(t *testing.T) {
	const changes, lease = 20, 600 * time.Millisecond
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			backends := []backend.Backend{srv.NewBackend(t), srv.NewBackend(t), srv.NewBackend(t)}
			handle := func(i int) *election.Election {
				return election.New(backends[i%len(backends)], "observed", election.WithPrefix(p), election.WithWatchdog(lease))
			}
			term, err := handle(0).Campaign(ctx, "c0")
			if err != nil {
				t.Fatal(err)
			}
			want := []election.Leader{mustLeader(t, ctx, handle(0))}

			octx, stop := context.WithCancel(ctx)
			defer stop()
			// On a loaded machine each step to an observer may wait for a
			// CPU as long as a round trip timed meanwhile did: the bounds
			// below allow three of those.
			trips := tripmeter.Start(t, context.Background(), srv.NewBackend(t))
			watchers := make([]*watcher, 3)
			var firsts []time.Duration
			for i := range watchers {
				e := election.New(srv.NewBackend(t), "observed", election.WithPrefix(p))
				start := time.Now()
				watchers[i] = &watcher{c: e.Observe(octx)}
				// Liveness only: the latency is checked below, with the
				// round trips timed meanwhile.
				watchers[i].next(t, 5*time.Second, "the first state")
				firsts = append(firsts, time.Since(start))
			}
			// all waits until every observer received the state the
			// leader's handle reads now, and returns the slowest time
			// since start.
			all := func(start time.Time, what string) time.Duration {
				t.Helper()
				l := mustLeader(t, ctx, handle(0))
				want = append(want, l)
				var slowest time.Duration
				for i, w := range watchers {
					if got := w.next(t, 5*time.Second, what); got != l {
						t.Fatalf("observer %d, %s: %+v; want %+v", i, what, got, l)
					}
					slowest = max(slowest, time.Since(start))
				}
				return slowest
			}
			var took []time.Duration
			proclaims := 0
			for i := 1; i <= changes; i++ {
				next := campaign(ctx, handle(i), fmt.Sprint("c", i))
				awaitQueued(t, ctx, handle(0), 1)
				if i%2 == 0 {
					start := time.Now()
					if err := term.Proclaim(ctx, fmt.Sprint("p", i)); err != nil {
						t.Fatal(err)
					}
					proclaims++
					took = append(took, all(start, fmt.Sprint("proclaim ", i)))
				}
				start := time.Now()
				if err := term.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				r := receive(t, next, 5*time.Second, "the next candidate")
				if r.err != nil {
					t.Fatal(r.err)
				}
				term = r.term
				took = append(took, all(start, fmt.Sprint("change ", i)))
			}

			// The keys deleted: the leader learns it at its next renewal
			// and tells the observers.
			k := "" + p + ":election:{observed}"
			deleted := time.Now()
			if _, err := backends[0].Eval(ctx, delKeys, []string{k, k + ":queue", k + ":expiry", k + ":values", k + ":leader"}); err != nil {
				t.Fatal(err)
			}
			closes(t, term.Done(), lease, "the leader's Done after the deletion")
			done := time.Since(deleted)
			for i, w := range watchers {
				if l := w.next(t, lease, "the lapse"); !l.IsZero() {
					t.Fatalf("observer %d after the deletion: %+v; want the zero Leader", i, l)
				}
			}
			want = append(want, election.Leader{})
			lapse := time.Since(deleted)

			for i, w := range watchers {
				if !slices.Equal(w.seen, want) {
					t.Errorf("observer %d saw %d states %v; want %d: %v", i, len(w.seen), w.seen, len(want), want)
				}
			}
			slices.Sort(took)
			slow := trips.Stop()
			t.Logf("first state %v after Observe; %d changes and %d Proclaims: p50 %v, max %v; keys deleted: Done after %v, lapse observed after %v; longest round trip meanwhile %v",
				firsts, changes, proclaims, took[len(took)/2], took[len(took)-1], done, lapse, slow)
			for _, d := range firsts {
				if d > 10*time.Millisecond+3*slow {
					t.Errorf("first state %v after Observe; want within 10ms, and three times %v more for the longest round trip timed meanwhile", d, slow)
				}
			}
			if took[len(took)-1] > 50*time.Millisecond+3*slow {
				t.Errorf("slowest change reached the observers %v after the call; want within 50ms, and three times %v more for the longest round trip timed meanwhile", took[len(took)-1], slow)
			}
			stop()
			for i, w := range watchers {
				deadline := time.After(time.Second)
			drain:
				for {
					select {
					case _, ok := <-w.c:
						if !ok {
							break drain
						}
					case <-deadline:
						t.Fatalf("observer %d: channel open a second after its ctx ended", i)
					}
				}
			}
		})
	}
}

var delKeys = backend.NewScript(`return redis.call('DEL', unpack(KEYS))`)

func mustLeader(t *testing.T, ctx context.Context, e *election.Election) election.Leader {
	t.Helper()
	l, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// An observer that does not read while the leader changes finds only the
// latest state on its channel, never an older one after it; and an
// observer that reads again follows the next changes.
func TestSlowObserverGetsTheLatest(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			e := election.New(srv.NewBackend(t), "slow", election.WithPrefix(p))
			octx, stop := context.WithCancel(ctx)
			defer stop()
			// On one backend, so one feed, which sends a change to all its
			// observers at once.
			ob := election.New(srv.NewBackend(t), "slow", election.WithPrefix(p))
			slow := ob.Observe(octx)
			fast := &watcher{c: ob.Observe(octx)}
			term, err := e.Campaign(ctx, "v0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { term.Resign(ctx) }()
			fast.next(t, time.Second, "v0")
			for i := 1; i <= 10; i++ {
				if err := term.Proclaim(ctx, fmt.Sprint("v", i)); err != nil {
					t.Fatal(err)
				}
				fast.next(t, time.Second, fmt.Sprint("v", i))
			}
			// An observer joining gets the current state when the feed
			// has sent it to the others.
			receive(t, ob.Observe(octx), time.Second, "a late observer")
			if l := receive(t, slow, time.Second, "the slow observer"); l.Value != "v10" {
				t.Fatalf("the slow observer's first read: %+v; want the latest, v10", l)
			}
			select {
			case l := <-slow:
				t.Fatalf("the slow observer then read %+v; want nothing more", l)
			case <-time.After(50 * time.Millisecond):
			}
			if err := term.Proclaim(ctx, "v11"); err != nil {
				t.Fatal(err)
			}
			if l := receive(t, slow, time.Second, "the slow observer, reading again"); l.Value != "v11" {
				t.Fatalf("read %+v; want v11", l)
			}
		})
	}
}
