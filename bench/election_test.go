package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The election scenario, small: every row measured, and the rows and
// targets printed.
func TestElectionScenario(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	steps := 0
	e, err := Election(ctx, addr, 2*electionRounds, electionRounds, nil, func(string) error { steps++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if steps != 2*electionRounds {
		t.Errorf("%d steps; want %d", steps, 2*electionRounds)
	}
	for name, r := range map[string]Result{"election uncontended": e.Uncont, "mutex uncontended": e.MutexUncont} {
		if r.Acquisitions != 2*electionRounds || len(r.PerOp) != electionRounds || r.RoundTrips == 0 {
			t.Errorf("%s: %d cycles in %d rounds, %d round trips", name, r.Acquisitions, len(r.PerOp), r.RoundTrips)
		}
	}
	for name, r := range map[string]Result{"election hand-over": e.Handoff, "mutex hand-off": e.MutexHandoff} {
		if len(r.Waits) != electionRounds || len(r.IdlePings) != electionRounds || r.GiveUps != 0 {
			t.Errorf("%s: %d waits, %d pings, %d give-ups; want %d, %d, 0", name, len(r.Waits), len(r.IdlePings), r.GiveUps, electionRounds, electionRounds)
		}
	}
	rep := &Report{Election: e}
	var out bytes.Buffer
	rep.writeElection(&out)
	rep.electionTargets(func(ok bool, format string, args ...any) { out.WriteString("target\n") })
	for _, want := range []string{"dsync-elect", "release to next holder, median", "uncontended round trips/op", "target\ntarget\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, &out)
		}
	}
	t.Logf("\n%s", &out)
}

// BenchmarkElection: uncontended Campaign+Resign, and the hand-over from
// Resign to a candidate's Campaign returning, beside the mutex's, with
// the candidate in a process of its own (procs=2) or not (procs=1).
func BenchmarkElection(b *testing.B) {
	a := addr(b)
	for _, impl := range []Impl{dsyncMutexImpl(), ElectionImpl} {
		b.Run("scenario=uncontended/impl="+impl.Name, func(b *testing.B) {
			r, err := Uncontended(context.Background(), a, impl, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.PerAcq(r.RoundTrips), "rtt/op")
			b.ReportMetric(r.PerAcq(r.ServerCalls), "server-calls/op")
		})
	}
	for _, procs := range []int{2, 1} {
		for _, impl := range []Impl{dsyncMutexImpl(), ElectionImpl} {
			b.Run(fmt.Sprintf("scenario=handover/procs=%d/impl=%s", procs, impl.Name), func(b *testing.B) {
				r, err := Handoff(context.Background(), a, impl, b.N, spawnFor(procs))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(percentile(r.Waits, 0.5).Microseconds()), "median-µs")
				b.ReportMetric(float64(percentile(r.IdlePings, 0.5).Microseconds()), "idle-rtt-µs")
			})
		}
	}
}

// The hand-over target is the mutex's median hand-off plus the median
// round trip from idle of the same rounds.
func TestElectionHandoverBound(t *testing.T) {
	ms := time.Millisecond
	e := ElectionResult{
		MutexHandoff: Result{Waits: []time.Duration{4 * ms, 5 * ms, 6 * ms}, IdlePings: []time.Duration{1 * ms, 2 * ms, 3 * ms}},
		Handoff:      Result{Waits: []time.Duration{5 * ms}, IdlePings: []time.Duration{1 * ms, 2 * ms, 9 * ms}},
	}
	if got, want := e.handoverBound(), 5*ms+2*ms; got != want {
		t.Errorf("bound %v; want %v", got, want)
	}
}
