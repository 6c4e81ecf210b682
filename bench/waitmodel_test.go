package bench

import (
	"bytes"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The required rate is (N−1) over the largest mean wait that the p99 and
// max bounds allow.
func TestRequiredRate(t *testing.T) {
	for _, c := range []struct {
		n        int
		p99, max time.Duration
		want     float64
	}{
		// 7 waiting; mean at most 0.99·1ms + 0.01·100ms = 1.99ms.
		{8, time.Millisecond, 100 * time.Millisecond, 7 / 0.00199},
		// The max alone: 0.01·50ms = 0.5ms.
		{8, 0, 50 * time.Millisecond, 7 / 0.0005},
		// redsync's figures in bench/README.md: p99 344µs, max 1000ms;
		// the targets 2x the p99 and 1/20 of the max.
		{8, 2 * 344 * time.Microsecond, 50 * time.Millisecond, 7 / (0.99*0.000688 + 0.01*0.05)},
		{2, 10 * time.Millisecond, 10 * time.Millisecond, 100},
	} {
		got := RequiredRate(c.n, c.p99, c.max)
		if math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("RequiredRate(%d, %v, %v) = %v, want %v", c.n, c.p99, c.max, got, c.want)
		}
	}
	if got := RequiredRate(8, 0, 0); !math.IsInf(got, 1) {
		t.Errorf("no wait allowed: %v, want +Inf", got)
	}
	for _, n := range []int{-1, 0, 1} {
		if got := RequiredRate(n, time.Millisecond, time.Second); got != 0 {
			t.Errorf("RequiredRate(%d, ...) = %v, want 0: nobody waits for anybody", n, got)
		}
	}
}

// Tighter bounds, or more contenders, require more.
func TestRequiredRateIsMonotonic(t *testing.T) {
	base := RequiredRate(8, time.Millisecond, 50*time.Millisecond)
	if RequiredRate(8, time.Millisecond/2, 50*time.Millisecond) <= base {
		t.Error("a tighter p99 requires no more")
	}
	if RequiredRate(8, time.Millisecond, 25*time.Millisecond) <= base {
		t.Error("a tighter max requires no more")
	}
	if RequiredRate(16, time.Millisecond, 50*time.Millisecond) <= base {
		t.Error("more contenders require no more")
	}
}

// A simulated run that meets the model's premises exactly: N contenders
// served in turn (FIFO) with holds of h, so each waits (N−1)·h. Its mean
// wait is (N−1)/R, its p99 and max equal, and the required rate for its
// own p99 and max is its own rate: the bound is tight.
func TestRequiredRateIsTightForARoundRobin(t *testing.T) {
	const n, h = 8, 200 * time.Microsecond
	rate := 1 / h.Seconds()
	wait := (n - 1) * h
	got := RequiredRate(n, wait, wait)
	if math.Abs(got-rate) > 1e-6*rate {
		t.Errorf("round robin at %.0f/s, wait %v: required %.0f/s, want its own rate", rate, wait, got)
	}
}

func TestSerialCeiling(t *testing.T) {
	if got := SerialCeiling(100 * time.Microsecond); math.Abs(got-5000) > 1e-9 {
		t.Errorf("SerialCeiling(100µs) = %v, want 5000", got)
	}
	if got := SerialCeiling(0); got != 0 {
		t.Errorf("SerialCeiling(0) = %v, want 0", got)
	}
}

// With hand-offs dearer than relocks, the ceiling is 1 − (N−1)·(h − r)/P
// of the relocking rate; it is 1 or more only with hand-offs no dearer.
func TestHoldRateCeiling(t *testing.T) {
	us := func(n float64) time.Duration { return time.Duration(n * float64(time.Microsecond)) }
	for _, c := range []struct {
		name                 string
		n                    int
		relock, handoff, p99 time.Duration
		want                 float64
	}{
		// Run 42 of bench/README.md: redsync 704/s (1,420µs a cycle),
		// dsync-handoff 640/s (1,563µs), redsync's p99 381.6ms / 20:
		// 1 − 7·142µs/19,080µs.
		{"run 42", 8, us(1e6 / 704), us(1e6 / 640), us(381.6e3 / 20), 0.948},
		// A hand-off 10% dearer than a 1ms relock, 20ms allowed: 1 − 7·0.1/20.
		{"dearer", 8, time.Millisecond, 1100 * time.Microsecond, 20 * time.Millisecond, 1 - 0.7/20},
		// As cheap as a relock: every release may hand over.
		{"as cheap", 8, time.Millisecond, time.Millisecond, 20 * time.Millisecond, 1},
		// The hand-off ring of run 42 (710/s) against redsync's relock.
		{"cheaper", 8, us(1e6 / 704), us(1e6 / 710), 20 * time.Millisecond, 710.0 / 704},
		// 7 waiters served in turn at 3ms a hand-off wait 21ms > 20ms.
		{"too slow", 8, time.Millisecond, 3 * time.Millisecond, 20 * time.Millisecond, 0},
	} {
		got := HoldRateCeiling(c.n, c.relock, c.handoff, c.p99)
		if math.Abs(got-c.want) > 1e-3*c.want {
			t.Errorf("%s: HoldRateCeiling(%d, %v, %v, %v) = %v, want %v", c.name, c.n, c.relock, c.handoff, c.p99, got, c.want)
		}
	}
	if got := HoldRateCeiling(1, time.Millisecond, 2*time.Millisecond, time.Millisecond); !math.IsInf(got, 1) {
		t.Errorf("one contender: %v, want +Inf", got)
	}
	if HoldRateCeiling(8, time.Millisecond, 1100*time.Microsecond, 10*time.Millisecond) >= HoldRateCeiling(8, time.Millisecond, 1100*time.Microsecond, 20*time.Millisecond) {
		t.Error("a tighter p99 allows no less")
	}
}

// A policy that lets each holder relock k−1 times and then hands over to
// the next in turn: a streak lasts S = h + (k−1)·r, k acquisitions, and a
// waiter waits for the N−1 other streaks. Among the k whose waits stay
// within P, none beats the ceiling, and the best comes within one relock
// of it: the bound is the streaks' own, at the streak that fills P.
func TestHoldRateCeilingBoundsStreaks(t *testing.T) {
	const n = 8
	r, h, p := 1420*time.Microsecond, 1563*time.Microsecond, 30*time.Millisecond
	ceiling := HoldRateCeiling(n, r, h, p)
	best := 0.0
	for k := 1; k <= 50; k++ {
		streak := h + time.Duration(k-1)*r
		if time.Duration(n-1)*streak > p {
			break
		}
		rate := float64(k) * r.Seconds() / streak.Seconds() // of 1/r
		if rate > ceiling+1e-9 {
			t.Errorf("k=%d: %.4f of the relocking rate with waits of %v, above the ceiling %.4f", k, rate, time.Duration(n-1)*streak, ceiling)
		}
		best = max(best, rate)
	}
	// One relock more per streak would cost (h−r)/S of the rate at most.
	if slack := (h - r).Seconds() / (p.Seconds() / (n - 1)); ceiling-best > slack {
		t.Errorf("the best streak reaches %.4f, the ceiling %.4f: more than %.4f apart", best, ceiling, slack)
	}
	if best <= 0 {
		t.Fatal("no streak fits the bound")
	}
}

// The targets print the ceiling beside the 1 ms-hold rate line, for
// dsync-handoff's hand-off and, with processes, for the ring's.
func TestTargetsPrintTheHoldRateCeiling(t *testing.T) {
	r := &Report{
		Config: Config{Contenders: 8, Hold: time.Millisecond, Spawn: func() *exec.Cmd { return nil }},
		Ring:   710,
		ContHold: map[string]Result{
			"dsync":         roundOf(642, time.Second, 15*time.Millisecond),
			"dsync-handoff": roundOf(640, time.Second, 15*time.Millisecond),
			"redsync":       roundOf(704, time.Second, 381600*time.Microsecond),
		},
	}
	var out bytes.Buffer
	r.writeTargets(&out)
	want := "info   8 contenders in processes, 1ms hold: with dsync-handoff's hand-off (1562µs a cycle) and redsync's relock (1420µs), waits within 19.1ms allow at most 0.95x redsync's rate; with the hand-off ring's (1408µs), 1.01x (bench/waitmodel.go)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("targets:\n%s\nwant the line %q", out.String(), want)
	}
}
