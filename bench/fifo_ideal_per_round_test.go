package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fairlockTargets returns the fairlock lines of the targets for 8
// contenders and a 1 ms hold whose run had rounds rs.
func fairlockTargets(t *testing.T, rs ...Result) string {
	t.Helper()
	f := rounds(rs...)
	r := &Report{
		Config:   Config{Contenders: 8, Hold: time.Millisecond},
		ContHold: map[string]Result{"dsync": f, "dsync-fair": f},
	}
	var out bytes.Buffer
	r.writeTargets(&out)
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "fairlock") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// A fair lock's waits are counted against the FIFO ideal of their own
// round: a run whose rounds came at different speeds of the machine is
// FIFO if each round is, however far the slow rounds' waits stand above
// the whole run's mean cycle.
func TestFIFOIdealIsTheRoundsOwn(t *testing.T) {
	// Three rounds at 1 ms a cycle and two at 2 ms, each wait exactly 7
	// cycles of its round: the pooled p99 is 14 ms against an ideal of 7
	// cycles of the mean 1.25 ms (1.6x); in each round it is 1.0x.
	fast := roundOf(1000, time.Second, 7*time.Millisecond)
	slow := roundOf(500, time.Second, 14*time.Millisecond)
	got := fairlockTargets(t, fast, slow, fast, slow, fast)
	for _, want := range []string{
		"met    fairlock, 8 contenders, 1ms hold: p99 wait 1.00x the FIFO ideal",
		"met    fairlock, 8 contenders, 1ms hold: max wait 1.00x the FIFO ideal",
		"info   fairlock, 8 contenders, 1ms hold: pooled over the rounds, p99 wait 14.0ms and max 14.0ms = 1.60x and 1.60x",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets:\n%s\nwant a line with %q", got, want)
		}
	}
}

// A round whose waits stand above its own ideal misses the target,
// whatever the other rounds did.
func TestFIFOIdealMissedWithinARound(t *testing.T) {
	ok := roundOf(1000, time.Second, 7*time.Millisecond)
	// 7 cycles for 96% of this round's waits, 10 cycles (1.43x) for 4%.
	late := roundOf(1000, time.Second, 7*time.Millisecond)
	for i := 960; i < 1000; i++ {
		late.Waits[i] = 10 * time.Millisecond
	}
	got := fairlockTargets(t, ok, late)
	if want := "MISSED fairlock, 8 contenders, 1ms hold: p99 wait 1.43x the FIFO ideal"; !strings.Contains(got, want) {
		t.Errorf("targets:\n%s\nwant a line with %q", got, want)
	}
}
