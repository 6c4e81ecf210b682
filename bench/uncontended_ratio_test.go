package bench

import (
	"testing"
	"time"
)

// A machine that drifts between rounds moves both implementations of a
// round alike: the ratio is the median of the rounds' ratios, not the
// ratio of two medians taken from different rounds.
func TestUncontendedRatioPairsTheRounds(t *testing.T) {
	us := func(xs ...int) []time.Duration {
		ds := make([]time.Duration, len(xs))
		for i, x := range xs {
			ds[i] = time.Duration(x) * time.Microsecond
		}
		return ds
	}
	// Each round the row costs 0.9x the peer, in rounds whose speed
	// differs threefold; the medians alone would say 2.7x.
	u := UncontendedRow{times: us(90, 270, 90, 270, 270), cpus: us(45, 135, 45, 135, 135)}
	peer := UncontendedRow{times: us(100, 300, 100, 300, 100), cpus: us(50, 150, 50, 150, 50)}
	if got := float64(median(u.times)) / float64(median(peer.times)); got < 1.5 {
		t.Fatalf("the ratio of the medians is %.2f; the case means to make it 1.5 or more", got)
	}
	if got := u.ratio(peer, false); got != 0.9 {
		t.Errorf("time ratio %.3f, want 0.9 (four of five rounds)", got)
	}
	if got := u.ratio(peer, true); got != 0.9 {
		t.Errorf("CPU ratio %.3f, want 0.9", got)
	}
	if got := u.ratio(UncontendedRow{}, true); got != 0 {
		t.Errorf("ratio to a row without rounds %.3f, want 0", got)
	}
}

func TestNamedCommandsTimeSumsTheirUsec(t *testing.T) {
	const info = "# Commandstats\r\n" +
		"cmdstat_set:calls=10,usec=7,usec_per_call=0.70,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=4,usec=21,usec_per_call=5.25,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha_ro:calls=1,usec=1000,usec_per_call=1000.00,rejected_calls=0,failed_calls=0\r\n"
	got, err := namedCommandsTime(info, "evalsha", "eval")
	if err != nil || got != 30*time.Microsecond {
		t.Errorf("namedCommandsTime = %v, %v; want 30µs (evalsha and eval, nothing else)", got, err)
	}
	if _, err := namedCommandsTime("cmdstat_eval:calls=1,usec=x\r\n", "eval"); err == nil {
		t.Error("a usec that is not a number gave no error")
	}
}

// Redis CPU is compared with redsync over the row's own client library.
func TestUncontendedSameClient(t *testing.T) {
	names := map[string]bool{}
	for _, impl := range UncontendedImpls() {
		names[impl.Name] = true
	}
	for impl, want := range map[string]string{
		"dsync": "redsync", "dsync-fair": "redsync", "redsync": "redsync",
		"dsync-goredis": "redsync-goredis", "redislock": "redsync-goredis", "redsync-goredis": "redsync-goredis",
	} {
		if !names[impl] || !names[want] {
			t.Fatalf("%s or %s is not a row of the table", impl, want)
		}
		if got := sameClient(impl); got != want {
			t.Errorf("sameClient(%q) = %q, want %q", impl, got, want)
		}
	}
}
