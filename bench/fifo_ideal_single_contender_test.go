package bench

import (
	"strings"
	"testing"
	"time"
)

// With one contender nobody queues: there is no FIFO ideal to set fairlock's
// waits against, and no target on them to miss (as the semaphore's with no
// more contenders than permits).
func TestFIFOIdealNoneForOneContender(t *testing.T) {
	f := rounds(roundOf(1000, time.Second, 50*time.Microsecond))
	r := &Report{
		Config:   Config{Contenders: 1, Hold: time.Millisecond},
		ContHold: map[string]Result{"dsync": f, "dsync-fair": f},
	}
	var out strings.Builder
	r.writeTargets(&out)
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "fairlock") && strings.Contains(l, "FIFO ideal") {
			t.Errorf("targets:\n%s\nwant no line on the FIFO ideal with one contender; got %q", out.String(), l)
		}
	}
	if want := "met    fairlock, 1 contenders, 1ms hold: throughput"; !strings.Contains(out.String(), want) {
		t.Errorf("targets:\n%s\nwant a line with %q", out.String(), want)
	}
}
