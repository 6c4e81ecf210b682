package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/gomodule/redigo/redis"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/election"
)

// ElectionImpl is dsync's election as a Client: Lock campaigns, Unlock
// resigns, handing leadership to the next candidate. It runs in the
// election scenario only, beside the dsync mutex.
var ElectionImpl = Impl{Name: "dsync-elect", Note: "election, default options: Campaign, Resign", New: newDsyncElection}

type dsyncElectionClient struct {
	pool *redis.Pool
	b    *bredigo.Backend
	e    *election.Election
	term *election.Term
}

func newDsyncElection(addr, name string, c *counter) Client {
	pool := redigoPool(addr, c)
	b := bredigo.New(pool)
	return &dsyncElectionClient{pool: pool, b: b, e: election.New(b, name)}
}

func (d *dsyncElectionClient) Lock(ctx context.Context) error {
	t, err := d.e.Campaign(ctx, "bench")
	d.term = t
	return err
}

func (d *dsyncElectionClient) Unlock(ctx context.Context) error {
	t := d.term
	d.term = nil
	if t == nil {
		return errors.New("election: resign without a term")
	}
	return t.Resign(ctx)
}

func (d *dsyncElectionClient) Close() { d.b.Close(); d.pool.Close() }

// ElectionResult is what the election scenario measured: uncontended
// Campaign+Resign and the hand-over from Resign to the next leader, each
// beside the dsync mutex's lock+unlock and hand-off in the same rounds.
type ElectionResult struct {
	Uncont, MutexUncont   Result
	Handoff, MutexHandoff Result
}

// electionRounds is how many interleaved rounds the election scenario is
// split into.
const electionRounds = 10

// Election measures uncontended Campaign+Resign over cycles and the
// hand-over from Resign to a parked candidate's Campaign returning over
// handoffs, each interleaved in electionRounds rounds with the dsync
// mutex's lock+unlock and hand-off, so that the two are compared under
// the same conditions. step is told of each step and ends the run if it
// returns an error.
func Election(ctx context.Context, addr string, cycles, handoffs int, spawn Spawn, step func(string) error) (ElectionResult, error) {
	var r ElectionResult
	pair := []Impl{dsyncMutexImpl(), ElectionImpl}
	for i := 0; i < electionRounds; i++ {
		if i%2 == 1 {
			slices.Reverse(pair)
		}
		for _, impl := range pair {
			if err := step(fmt.Sprintf("election: uncontended and hand-over, round %d of %d: %s", i+1, electionRounds, impl.Name)); err != nil {
				return r, err
			}
			u, err := Uncontended(ctx, addr, impl, max(1, cycles/electionRounds))
			if err != nil {
				return r, fmt.Errorf("%s uncontended: %w", impl.Name, err)
			}
			h, err := Handoff(ctx, addr, impl, max(1, handoffs/electionRounds), spawn)
			if err != nil {
				return r, fmt.Errorf("%s handoff: %w", impl.Name, err)
			}
			uncont, handoff := &r.Uncont, &r.Handoff
			if impl.Name != ElectionImpl.Name {
				uncont, handoff = &r.MutexUncont, &r.MutexHandoff
			}
			uncont.add(u)
			handoff.Acquisitions += h.Acquisitions
			handoff.GiveUps += h.GiveUps
			handoff.Waits = sorted(append(handoff.Waits, h.Waits...))
			handoff.IdlePings = sorted(append(handoff.IdlePings, h.IdlePings...))
		}
	}
	return r, nil
}

// handoverBound is the election's hand-over target (DESIGN.md §7): the
// mutex's hand-off plus one round trip from idle, medians of the same
// rounds.
func (e ElectionResult) handoverBound() time.Duration {
	return percentile(e.MutexHandoff.Waits, 0.5) + percentile(sorted(slices.Concat(e.Handoff.IdlePings, e.MutexHandoff.IdlePings)), 0.5)
}

// writeElection prints the election scenario, if it ran.
func (r *Report) writeElection(w io.Writer) {
	e := r.Election
	if e.Uncont.Acquisitions == 0 {
		return
	}
	fmt.Fprintf(w, "\nelection (%s) beside the dsync mutex, %d interleaved rounds; the next candidate %s\n", ElectionImpl.Name, electionRounds,
		map[bool]string{true: "in a process of its own", false: "in this process"}[r.Config.Spawn != nil])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tdsync\t"+ElectionImpl.Name+"\t")
	row := func(label string, f func(u, h Result) string) {
		fmt.Fprintln(tw, label+"\t"+f(e.MutexUncont, e.MutexHandoff)+"\t"+f(e.Uncont, e.Handoff)+"\t")
	}
	row("  uncontended time/op (median)", func(u, _ Result) string { return us(percentile(u.PerOp, 0.5)) })
	row("  uncontended round trips/op", func(u, _ Result) string { return fmt.Sprintf("%.2f", u.PerAcq(u.RoundTrips)) })
	row("  uncontended server calls/op", func(u, _ Result) string { return fmt.Sprintf("%.1f", u.PerAcq(u.ServerCalls)) })
	row("  release to next holder, median", func(_, h Result) string { return us(percentile(h.Waits, 0.5)) })
	row("  release to next holder, p99", func(_, h Result) string { return us(percentile(h.Waits, 0.99)) })
	row("  idle round trip", func(_, h Result) string { return us(percentile(h.IdlePings, 0.5)) })
	row("  give-ups", func(_, h Result) string { return fmt.Sprint(h.GiveUps) })
	tw.Flush()
	fmt.Fprintf(w, "election/mutex uncontended time: %.2fx (median of the paired rounds)\n", pairedRatio(e.Uncont, e.MutexUncont))
}

// electionTargets checks the election scenario's targets, if it ran.
func (r *Report) electionTargets(check func(ok bool, format string, args ...any)) {
	e := r.Election
	if e.Uncont.Acquisitions == 0 {
		return
	}
	check(e.Uncont.PerAcq(e.Uncont.RoundTrips) <= 2, "election, uncontended: %.2f round trips per Campaign+Resign (target 2)", e.Uncont.PerAcq(e.Uncont.RoundTrips))
	h, bound := percentile(e.Handoff.Waits, 0.5), e.handoverBound()
	check(h > 0 && h <= bound, "election: Resign to the next leader's Campaign returning, median %s (target <= the mutex's hand-off %s + a round trip from idle = %s)",
		us(h), us(percentile(e.MutexHandoff.Waits, 0.5)), us(bound))
}
