package lease

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"go.uber.org/goleak"
)

// The scheduler's goroutines: retirement when idle, stuck calls, and a
// bounded number of goroutines.

// TestRetireAfterRelease: once the last lease is released the scheduler
// leaves the registry within IdleRetire, no goroutine of it is left, and a
// new Start works on a fresh scheduler.
func TestRetireAfterRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 30 * time.Second // the timer is armed 10s ahead
		t0 := time.Now()
		l1 := h.start(f, watchdog("retire:1", ttl), t0)
		l2 := h.start(f, watchdog("retire:2", ttl), t0)
		s := registered(f)
		if s == nil {
			t.Fatal("no scheduler registered")
		}
		sleepUntil(t0.Add(ttl/3 + time.Second)) // one round done
		if c := f.numCalls(); c != 1 {
			t.Fatalf("%d calls, want 1", c)
		}
		l1.Release()
		assertEnded(t, f, l1, false)
		l1.Release() // idempotent
		if leases, _ := Stats(f); leases != 1 {
			t.Errorf("Stats leases = %d, want 1", leases)
		}
		released := time.Now()
		l2.Release()
		assertEnded(t, f, l2, false)
		sleepUntil(released.Add(IdleRetire))
		if registered(f) != nil {
			t.Fatalf("scheduler still registered %v after its last lease was released", IdleRetire)
		}
		if n := schedulerGoroutines(); n != 0 {
			t.Errorf("%d scheduler goroutines left", n)
		}
		if leases, calls := Stats(f); leases != 0 || calls != 0 {
			t.Errorf("Stats of a retired scheduler = %d, %d", leases, calls)
		}
		n := f.numCalls()
		sleepUntil(t0.Add(3 * ttl))
		if got := f.numCalls(); got != n {
			t.Errorf("%d calls after retirement", got-n)
		}

		// A new Start works.
		t1 := time.Now()
		l3 := h.start(f, watchdog("retire:3", ttl), t1)
		if s3 := registered(f); s3 == nil || s3 == s || l3.s != s3 {
			t.Fatalf("new Start did not make a new scheduler")
		}
		sleepUntil(t1.Add(ttl/3 + time.Millisecond))
		if ts := f.callsOf("retire:3"); len(ts) != 1 || ts[0].Sub(t1) != ttl/3 {
			t.Errorf("new lease renewed at %v, want once at t1+%v", ts, ttl/3)
		}
		assertActive(t, f, l3)
	})
}

// TestRetireWhileRenewalInFlight: releasing the last lease while its
// renewal is in flight retires the scheduler within IdleRetire; the
// renewal's return changes nothing.
func TestRetireWhileRenewalInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("inflight:1", ttl), t0)
		open := f.block()
		sleepUntil(t0.Add(ttl / 3))
		if f.inFlight() != 1 {
			t.Fatalf("renewal not in flight")
		}
		l.Release()
		assertEnded(t, f, l, false)
		sleepUntil(time.Now().Add(IdleRetire))
		if registered(f) != nil {
			t.Errorf("scheduler still registered %v after its last lease was released", IdleRetire)
		}
		open()
		synctest.Wait()
		if n := schedulerGoroutines(); n != 0 {
			t.Errorf("%d scheduler goroutines left", n)
		}
		if l.Lost() {
			t.Errorf("released lease became lost")
		}
		sleepUntil(t0.Add(3 * ttl))
		if c := f.numCalls(); c != 1 {
			t.Errorf("%d calls, want 1", c)
		}
	})
}

// TestRetireAfterLoss: a scheduler whose last lease was lost (and, since a
// lost owner's hold leaves the index, never released) retires too. The
// registry doc: "forgets them when they fall idle"; the package doc: "an
// idle backend costs nothing".
func TestRetireAfterLoss(t *testing.T) {
	const ttl = 3 * time.Second
	cases := []struct {
		name string
		lose func(f *fakeBackend, l *Lease, t0 time.Time)
	}{
		{"expired", func(f *fakeBackend, l *Lease, t0 time.Time) {
			f.setErr(errUnavailable)
			sleepUntil(t0.Add(ttl))
		}},
		{"gone", func(f *fakeBackend, l *Lease, t0 time.Time) {
			f.drop(l.spec.Key)
			sleepUntil(t0.Add(ttl / 3))
		}},
		{"closed", func(f *fakeBackend, l *Lease, t0 time.Time) {
			f.setErr(dsync.ErrClosed)
			sleepUntil(t0.Add(ttl / 3))
		}},
		{"kept after gone", func(f *fakeBackend, l *Lease, t0 time.Time) {
			l.BeginRelease(Begin{})
			f.drop(l.spec.Key)
			sleepUntil(t0.Add(ttl / 3))
			l.Settle(1, 1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				f := h.fake()
				t0 := time.Now()
				l := h.start(f, watchdog("retire-lost:1", ttl), t0)
				c.lose(f, l, t0)
				assertEnded(t, f, l, true)
				sleepUntil(time.Now().Add(IdleRetire))
				if registered(f) != nil {
					t.Errorf("scheduler still registered %v after its last lease was lost (%s)", IdleRetire, c.name)
				}
				if n := schedulerGoroutines(); n != 0 {
					t.Errorf("%d scheduler goroutines left", n)
				}
			})
		})
	}
}

// TestStuckRenewalDoesNotDelayOthers: a renewal call that hangs until its
// context's deadline delays neither another group's renewals nor the loss
// of its own leases, reported at their deadline.
func TestStuckRenewalDoesNotDelayOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		interval := ttl / 3
		t0 := time.Now()
		stuck := h.start(f, watchdog("stuck:a", ttl), t0)
		stuck2 := h.start(f, watchdog("stuck:a2", ttl), t0.Add(200*time.Millisecond))
		specB := watchdog("stuck:b", ttl)
		specB.Renew = scriptB
		fine := h.start(f, specB, t0)
		f.setStuck(scriptA)

		sleepUntil(t0.Add(ttl - time.Millisecond))
		assertActive(t, f, stuck)
		if ts := f.renewedAt("stuck:b"); len(ts) != 2 || !ts[0].Equal(t0.Add(interval)) || !ts[1].Equal(t0.Add(2*interval)) {
			t.Errorf("other group renewed at %v, want at t0+1s and t0+2s", ts)
		}
		sleepUntil(t0.Add(ttl))
		assertEnded(t, f, stuck, true)
		// stuck2 rode in the same call; its own deadline is later.
		if stuck2.Deadline().After(t0.Add(ttl)) {
			assertActive(t, f, stuck2)
		}
		sleepUntil(stuck2.Deadline())
		assertEnded(t, f, stuck2, true)
		sleepUntil(t0.Add(3 * ttl))
		assertActive(t, f, fine)
		if ts := f.renewedAt("stuck:b"); len(ts) != 9 {
			t.Errorf("other group renewed %d times by t0+3TTL, want 9", len(ts))
		}
	})
}

// TestStuckCallsDoNotDelayLossBeyondDeadline: with MaxRenewing calls stuck
// (a partitioned server answers none), a lease of a shorter TTL in another
// group must still be lost by its deadline: the package promises that the
// client gives up no later than the server expires the key.
func TestStuckCallsDoNotDelayLossBeyondDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const long = 30 * time.Second
		t0 := time.Now()
		for i := range MaxRenewing {
			s := backend.NewScript(fmt.Sprintf("-- renew %d", i))
			spec := watchdog(fmt.Sprintf("starve:long%d", i), long)
			spec.Renew = s
			h.start(f, spec, t0)
			f.setStuck(s)
		}
		sleepUntil(t0.Add(long / 3)) // MaxRenewing calls stuck until t0+30s
		if got := f.inFlight(); got != MaxRenewing {
			t.Fatalf("%d calls in flight, want %d", got, MaxRenewing)
		}
		const short = 3 * time.Second
		t1 := t0.Add(long/3 + 500*time.Millisecond)
		sleepUntil(t1)
		spec := watchdog("starve:short", short)
		spec.Renew = scriptB
		l := h.start(f, spec, t1)
		f.setStuck(scriptB) // the server answers nothing
		lost := make(chan time.Time, 1)
		go func() {
			<-l.Done()
			lost <- time.Now()
		}()
		deadline := t1.Add(short)
		sleepUntil(deadline)
		if !isDone(l) {
			t.Errorf("short lease not lost at its deadline t0+%v, when the server expired its key (renewal attempts by then: %d)",
				deadline.Sub(t0), len(f.callsOf("starve:short")))
		}
		sleepUntil(t0.Add(2 * long))
		if lostAt := <-lost; lostAt.After(deadline) {
			t.Logf("short lease lost at t0+%v, %v after its deadline", lostAt.Sub(t0), lostAt.Sub(deadline))
		}
	})
}

// TestGoroutinesBounded: however many groups are due, at most MaxRenewing
// renewal calls are in flight.
func TestGoroutinesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		for i := range 10 {
			s := backend.NewScript(fmt.Sprintf("-- bounded %d", i))
			spec := watchdog(fmt.Sprintf("bounded:%d", i), ttl)
			spec.Renew = s
			h.start(f, spec, t0)
		}
		open := f.block()
		sleepUntil(t0.Add(ttl / 3))
		if got := f.inFlight(); got != MaxRenewing {
			t.Errorf("%d calls in flight, want MaxRenewing = %d", got, MaxRenewing)
		}
		open()
		synctest.Wait()
		if got := f.numCalls(); got != 10 {
			t.Errorf("%d calls, want 10", got)
		}
		for _, l := range h.leases {
			assertActive(t, f, l)
		}
	})
}

// TestNoLeakAfterBubble checks with goleak, outside any bubble, that the
// tests before it (this file sorts last) leave no goroutine behind.
func TestNoLeakAfterBubble(t *testing.T) {
	goleak.VerifyNone(t)
}
