package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// stalledRound is a round of 8 contenders in which nobody acquired: each
// wait was cut at the round's end, a second long.
func stalledRound() Result {
	r := roundOf(8, time.Second, time.Second)
	r.Acquisitions = 0
	return r
}

// A round in which the lock was never acquired has no cycle to count its
// waits in: they are longer than any ideal, not left out. Left out, a run
// whose lock stalled for a whole round met the max-wait target.
func TestFIFOIdealCountsAStalledRoundsWaits(t *testing.T) {
	fast := roundOf(1000, time.Second, 7*time.Millisecond)
	r := rounds(fast, fast, stalledRound(), fast, fast)
	if len(r.WaitCycles) != len(r.Waits) {
		t.Errorf("%d waits in cycles of %d waits: the stalled round's are missing", len(r.WaitCycles), len(r.Waits))
	}
	if m := percentile(r.WaitCycles, 1); !math.IsInf(m, 1) {
		t.Errorf("longest wait %.2f cycles; want unbounded, as the stalled round acquired nothing", m)
	}
	got := fairlockTargets(t, fast, fast, stalledRound(), fast, fast)
	if want := "MISSED fairlock, 8 contenders, 1ms hold: max wait"; !strings.Contains(got, want) {
		t.Errorf("targets:\n%s\nwant a line with %q", got, want)
	}
	if strings.Contains(got, "Inf") {
		t.Errorf("targets:\n%s\nwant the stalled round said in words, not as an infinite ratio", got)
	}
}

// The semaphore's p99 counts a stalled round's waits too: with most of a
// run's waits in a round that acquired nothing, its p99 is that round's.
func TestSemaphoreP99CountsAStalledRoundsWaits(t *testing.T) {
	stalled := roundOf(16, time.Second, time.Second)
	stalled.Acquisitions = 0
	ok := roundOf(10, time.Second, 1200*time.Millisecond) // 12 cycles of 100ms: the ideal
	r := &Report{
		Config: Config{SemContenders: 16, Hold: time.Millisecond},
		Sem:    map[string]Result{"dsync": semResult(300, 0), SemImpl.Name: rounds(ok, stalled)},
	}
	var out strings.Builder
	r.writeTargets(&out)
	if want := "MISSED semaphore, capacity 4, 16 contenders as goroutines, 1ms hold: p99"; !strings.Contains(out.String(), want) {
		t.Errorf("targets:\n%s\nwant a line with %q", out.String(), want)
	}
}
