package bench

import (
	"math"
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
