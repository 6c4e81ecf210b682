package lease

import (
	"container/heap"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// takeDue takes l off its scheduler's queue, as a tick does with a lease
// whose renewal is due, and returns the bundle the tick would send.
func takeDue(s *Scheduler, l *Lease) bundle {
	s.mu.Lock()
	defer s.mu.Unlock()
	heap.Remove(&s.queue, l.index)
	k := groupKey{script: l.spec.Renew, nkeys: len(l.spec.Keys), nargs: 3 + len(l.spec.Extra)}
	return bundle{&group{groupKey: k, leases: []*Lease{l}}}
}

// TestRenewalLateForItsDeadlineLoses: a lease taken off the queue for a
// renewal whose call only goes out after the lease's deadline (the
// goroutines between the tick and the call ran late, on a loaded machine)
// is lost then, not left waiting for a renewal nothing will send. Before,
// the call left it out and no one looked at it again: its Done never
// closed.
func TestRenewalLateForItsDeadlineLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("late:send", ttl), t0)
		s := sched(f)
		bd := takeDue(s, l)
		sleepUntil(l.Deadline())
		s.send(bd)
		if !isDone(l) || !l.Lost() {
			t.Fatalf("a renewal sent after the deadline: Done closed %v, Lost %v; want the lease lost", isDone(l), l.Lost())
		}
		if got, want := l.Reason(), "renewals failed until the lease ran out"; got != want {
			t.Errorf("reason %q, want %q", got, want)
		}
		if n := len(f.callsOf("late:send")); n != 0 {
			t.Errorf("%d renewal calls for a lease past its deadline, want none", n)
		}
	})
}

// TestDispatchLateForItsDeadlineLoses: the dispatcher, started after the
// deadlines of the leases it was given, loses every one, whichever of its
// two ways (the deadline timer, or a free call slot) it takes for each.
func TestDispatchLateForItsDeadlineLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		var bundles []bundle
		var leases []*Lease
		for i := range 16 {
			l := h.start(f, watchdog(fmt.Sprintf("late:dispatch%d", i), ttl), t0)
			leases = append(leases, l)
			bundles = append(bundles, takeDue(sched(f), l))
		}
		sleepUntil(t0.Add(ttl))
		sched(f).dispatch(bundles)
		synctest.Wait()
		for _, l := range leases {
			if !isDone(l) || !l.Lost() {
				t.Errorf("%s: Done closed %v, Lost %v; want the lease lost", l.spec.Name, isDone(l), l.Lost())
			}
		}
	})
}
