package lease

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestRecheckLosesAtTheDeadline: after a reconnection (Check), checks
// that keep failing are retried quickly, but never past the lease's
// deadline: the lease is lost at its deadline, as a renewal's retries
// lose it, not at the first recheck after it.
func TestRecheckLosesAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		l := h.start(f, watchdog("recheck:1", ttl), time.Now())
		f.setErr(errUnavailable) // the server is out of reach from now on
		deadline := l.Deadline()
		sleepUntil(deadline.Add(-recheckDelay - 2*time.Millisecond))
		assertActive(t, f, l)
		sched(f).Check()
		sleepUntil(deadline)
		if !isDone(l) || !l.Lost() {
			t.Fatalf("at its deadline, after failing rechecks: Done closed %v, Lost %v; want the lease lost then", isDone(l), l.Lost())
		}
	})
}
