package bench

import (
	"math"
	"testing"
	"time"
)

// readme is the 2-vCPU machine of bench/README.md's rwlock section.
var readme = RWModelInput{Contenders: 8, Hold: time.Millisecond, MutexRate: 654, ReadRate: 3880}

// near reports whether got is within tol of want, relatively.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

// nearNs reports whether d is want seconds, to the nanosecond.
func nearNs(d time.Duration, want float64) bool { return math.Abs(d.Seconds()-want) <= 1e-9 }

func TestRWModelKnownCases(t *testing.T) {
	free := RWModelInput{Contenders: 8, Hold: time.Millisecond, MutexRate: 1000, ReadRate: 8000}
	alone := RWModelInput{Contenders: 1, Hold: time.Millisecond, MutexRate: 700, ReadRate: 500}
	for _, tc := range []struct {
		name     string
		in       RWModelInput
		reads    float64
		preferR  bool
		min, max float64 // the model's rate, acquisitions/s
	}{
		// Calibration: the two measured rates come back.
		{"all writes is the mutex", readme, 0, false, 653.9, 654.1},
		{"all writes is the mutex, readers preferred", readme, 0, true, 653.9, 654.1},
		{"all reads is readers alone", readme, 1, false, 3879.6, 3880.4},
		{"all reads is readers alone, readers preferred", readme, 1, true, 3879.6, 3880.4},
		// bench/README.md: 2,430/s, 3.7x the mutex.
		{"README, 10% writes", readme, 0.9, false, 3.65 * 654, 3.80 * 654},
		{"README, half writes", readme, 0.5, false, 1.1 * 654, 1.25 * 654},
		// Free round trips: the drain alone, README's 4.0x.
		{"free round trips, 10% writes", free, 0.9, false, 3900, 4100},
		// One contender never waits, whatever it takes.
		{"one contender", alone, 0.5, false, 499.9, 500.1},
		{"one contender, readers preferred", alone, 0.5, true, 499.9, 500.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.ReadShare, in.PreferReaders = tc.reads, tc.preferR
			if r := RWCeiling(in); r.Rate < tc.min || r.Rate > tc.max {
				t.Errorf("RWCeiling(%+v).Rate = %.1f/s, want %.1f to %.1f", in, r.Rate, tc.min, tc.max)
			}
		})
	}
}

func TestRWModelCalibration(t *testing.T) {
	r := RWCeiling(readme)
	// Hold+4·Leg = 8/3880 s; Hold+Leg+Wake = 1/654 s.
	if leg := (8.0/3880 - 1e-3) / 4; !nearNs(r.Leg, leg) {
		t.Errorf("Leg = %v, want %.3fµs", r.Leg, leg*1e6)
	}
	if wake := 1.0/654 - 1e-3 - (8.0/3880-1e-3)/4; !nearNs(r.Wake, wake) {
		t.Errorf("Wake = %v, want %.3fµs", r.Wake, wake*1e6)
	}

	// Without the readers' rate, a leg is a wake-up, both from the mutex.
	in := readme
	in.ReadRate = 0
	r = RWCeiling(in)
	if r.Leg != r.Wake || !nearNs(r.Leg, (1.0/654-1e-3)/2) {
		t.Errorf("without ReadRate: Leg %v, Wake %v, want both %.3fµs", r.Leg, r.Wake, (1.0/654-1e-3)/2*1e6)
	}
	if !near(r.Rate, 654, 1e-4) {
		t.Errorf("without ReadRate: all writes give %.1f/s, want the mutex's 654/s", r.Rate)
	}

	// Rates faster than the hold allows calibrate to free round trips.
	in = RWModelInput{Contenders: 8, Hold: time.Millisecond, MutexRate: 2000, ReadRate: 10000}
	if r := RWCeiling(in); r.Leg != 0 || r.Wake != 0 || !near(r.Rate, 1000, 1e-4) {
		t.Errorf("RWCeiling(%+v) = %+v, want Leg and Wake 0 and 1000/s", in, r)
	}
}

// readmeWith returns readme with a read share, a preference and a spread.
func readmeWith(reads float64, preferReaders bool, spread float64) RWModelInput {
	in := readme
	in.ReadShare, in.PreferReaders, in.Spread = reads, preferReaders, spread
	return in
}

func TestRWModelSpread(t *testing.T) {
	// The calibration holds for the means.
	if r := RWCeiling(readmeWith(0, false, 0.5)); !near(r.Rate, 654, 0.005) {
		t.Errorf("Spread 0.5, all writes: %.1f/s, want the mutex's 654/s", r.Rate)
	}
	if r := RWCeiling(readmeWith(1, false, 0.5)); !near(r.Rate, 3880, 0.005) {
		t.Errorf("Spread 0.5, all reads: %.1f/s, want the readers' 3880/s", r.Rate)
	}

	// Spread only lowers the writer-preferring policy's ceiling.
	spread, constant := RWCeiling(readmeWith(ReadShare, false, 0.5)), RWCeiling(readmeWith(ReadShare, false, 0))
	if spread.Rate >= constant.Rate || spread.Rate < 0.95*constant.Rate {
		t.Errorf("10%% writes: %.1f/s with Spread 0.5, want 0.95 to 1 of %.1f/s without", spread.Rate, constant.Rate)
	}

	// With readers preferred, a queued writer waits for a moment with no
	// reader while the other contenders' writes queue behind it: about
	// 1.9x the mutex here. Constant legs give 1.4x or 3.6x, depending on
	// whether the wake-up is shorter than a leg; a spread does not.
	for _, readRate := range []float64{3880, 3900} {
		in := readmeWith(ReadShare, true, 0.5)
		in.ReadRate = readRate
		if r := RWCeiling(in); r.Rate < 1.8*654 || r.Rate > 2.1*654 {
			t.Errorf("readers preferred, Spread 0.5, ReadRate %v: %.0f/s, want 1.8 to 2.1 of the mutex's 654/s", readRate, r.Rate)
		}
	}
}

func TestRWModelSeed(t *testing.T) {
	in := readme
	in.ReadShare = ReadShare
	a, b := RWCeiling(in), RWCeiling(in)
	if a != b {
		t.Errorf("same seed: %+v, then %+v", a, b)
	}
	in.Seed = 1
	if c := RWCeiling(in); c.Rate == a.Rate || !near(c.Rate, a.Rate, 0.01) {
		t.Errorf("seeds 0 and 1: %.2f/s and %.2f/s, want different within 1%%", a.Rate, c.Rate)
	}
}

func TestRWModelInvalid(t *testing.T) {
	for _, in := range []RWModelInput{
		{Contenders: 0, Hold: time.Millisecond, MutexRate: 654},
		{Contenders: 8, Hold: -time.Millisecond, MutexRate: 654},
		{Contenders: 8, Hold: time.Millisecond},
	} {
		if r := RWCeiling(in); r != (RWModelResult{}) {
			t.Errorf("RWCeiling(%+v) = %+v, want zero", in, r)
		}
	}
}
