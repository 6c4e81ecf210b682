package lease

import (
	"testing"
	"testing/synctest"
	"time"
)

// A lease's life: a fixed lease's end, a short initial lease, and a
// renewal that finds the hold gone while a release is under way.

// TestFixedLeaseExpires: a fixed lease is never renewed and is lost at its
// deadline, leaving the index; its Initial is ignored.
func TestFixedLeaseExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 2 * time.Second
		t0 := time.Now()
		spec := fixed("fixed:1", ttl)
		spec.Initial = 500 * time.Millisecond // only for watchdog leases
		l := h.start(f, spec, t0)
		if got := l.Deadline(); !got.Equal(t0.Add(ttl)) {
			t.Errorf("Deadline = t0+%v, want t0+%v", got.Sub(t0), ttl)
		}
		if l.Token() != 7 || l.ID() != "fixed:1#1" || l.Owner() != "owner" || l.s != sched(f) {
			t.Errorf("accessors: token %d id %q owner %q", l.Token(), l.ID(), l.Owner())
		}
		if got := Find(f, "fixed:1", "owner", "x"); len(got) != 1 || got[0] != l {
			t.Fatalf("Find = %v, want the lease", got)
		}

		sleepUntil(t0.Add(ttl - time.Millisecond))
		assertActive(t, f, l)
		sleepUntil(t0.Add(ttl))
		assertEnded(t, f, l, true)
		if c := f.numCalls(); c != 0 {
			t.Errorf("fixed lease renewed: %d calls", c)
		}
		if got := Find(f, "fixed:1", "owner", "x"); len(got) != 0 {
			t.Errorf("Find after loss = %v", got)
		}
		if leases, _ := Stats(f); leases != 0 {
			t.Errorf("Stats leases = %d after loss", leases)
		}
		// Releasing a lost lease forgets it; it stays lost.
		l.Release()
		if !l.Lost() {
			t.Errorf("Release turned a lost lease into a released one")
		}
		sleepUntil(t0.Add(ttl + IdleRetire))
		if registered(f) != nil {
			t.Errorf("scheduler still registered after its only lease expired")
		}
	})
}

// TestReleaseCrossingGoneRenewal: a renewal that finds the hold gone while
// a final release is under way is not a loss; Release ends the lease as
// released.
func TestReleaseCrossingGoneRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("cross:1", ttl), t0)
		open := f.block()
		sleepUntil(t0.Add(ttl / 3)) // renewal in flight
		l.BeginRelease(Begin{})
		f.drop("cross:1") // the release deletes the hold first
		open()
		synctest.Wait()
		if isDone(l) || l.Lost() {
			t.Fatalf("renewal crossing a release reported a loss (done %v, lost %v)", isDone(l), l.Lost())
		}
		l.Release()
		assertEnded(t, f, l, false)
		sleepUntil(t0.Add(3 * ttl))
		if l.Lost() {
			t.Errorf("released lease became lost")
		}
		if c := f.numCalls(); c != 1 {
			t.Errorf("%d calls, want 1", c)
		}
	})
}

// TestKeptAfterGoneRenewalLoses: if the release turns out partial (Kept)
// after a renewal found the hold gone, the lease is lost then.
func TestKeptAfterGoneRenewalLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("kept:gone", ttl), t0)
		h.reenter(f, l, 2)
		other := h.start(f, watchdog("kept:other", ttl), t0)
		l.BeginRelease(Begin{})
		l.BeginRelease(Begin{}) // two releases under way
		f.drop("kept:gone")
		sleepUntil(t0.Add(ttl / 3))
		if isDone(l) {
			t.Fatalf("lost while releases are under way")
		}
		l.Settle(1, 1)
		if isDone(l) {
			t.Fatalf("lost while a release is still under way")
		}
		l.Settle(1, 1)
		assertEnded(t, f, l, true)
		assertActive(t, f, other)
	})
}

// TestKeptAfterRenewedStaysActive: a partial release crossing a
// successful renewal leaves the lease active and renewing.
func TestKeptAfterRenewedStaysActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("kept:ok", ttl), t0)
		h.reenter(f, l, 1)
		l.BeginRelease(Begin{})
		sleepUntil(t0.Add(ttl / 3))
		if ts := f.renewedAt("kept:ok"); len(ts) != 1 {
			t.Fatalf("renewed %d times, want 1", len(ts))
		}
		l.Settle(1, 1)
		assertActive(t, f, l)
		sleepUntil(t0.Add(4 * ttl / 3))
		if ts := f.renewedAt("kept:ok"); len(ts) != 4 {
			t.Errorf("renewed %d times by t0+4TTL/3, want 4", len(ts))
		}
		assertActive(t, f, l)
		// A later loss is reported normally: nothing is left releasing.
		f.drop("kept:ok")
		sleepUntil(t0.Add(5 * ttl / 3))
		assertEnded(t, f, l, true)
	})
}

// TestInitialLease: a lease acquired on a short Initial lease has deadline
// sent+Initial and is first renewed at Initial/3, to the full TTL.
func TestInitialLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		const initial = 600 * time.Millisecond
		t0 := time.Now()
		spec := watchdog("initial:1", ttl)
		spec.Initial = initial
		l := h.start(f, spec, t0)
		if got := l.Deadline(); !got.Equal(t0.Add(initial)) {
			t.Errorf("Deadline = t0+%v, want t0+%v", got.Sub(t0), initial)
		}
		sleepUntil(t0.Add(initial/3 - time.Millisecond))
		if c := f.numCalls(); c != 0 {
			t.Fatalf("renewed before Initial/3")
		}
		sleepUntil(t0.Add(initial / 3))
		ts := f.renewedAt("initial:1")
		if len(ts) != 1 {
			t.Fatalf("not renewed at Initial/3 (t0+%v)", initial/3)
		}
		r1 := ts[0]
		if got := l.Deadline(); !got.Equal(r1.Add(ttl)) {
			t.Errorf("Deadline after the first renewal = renewal+%v, want +%v", got.Sub(r1), ttl)
		}
		sleepUntil(r1.Add(ttl/3 - time.Millisecond))
		if n := len(f.renewedAt("initial:1")); n != 1 {
			t.Errorf("renewed again before TTL/3")
		}
		sleepUntil(r1.Add(ttl / 3))
		if ts := f.renewedAt("initial:1"); len(ts) != 2 || !ts[1].Equal(r1.Add(ttl/3)) {
			t.Errorf("renewals at %v, want the second at first+TTL/3", ts)
		}
		assertActive(t, f, l)

		// An Initial not shorter than TTL is ignored.
		spec2 := watchdog("initial:2", ttl)
		spec2.Initial = 2 * ttl
		t1 := time.Now()
		l2 := h.start(f, spec2, t1)
		if got := l2.Deadline(); !got.Equal(t1.Add(ttl)) {
			t.Errorf("Initial > TTL: Deadline = t1+%v, want t1+%v", got.Sub(t1), ttl)
		}
	})
}

// TestInitialLeaseLostAtInitialDeadline: a lease on its short Initial lease
// whose renewals fail is lost at sent+Initial, not sent+TTL.
func TestInitialLeaseLostAtInitialDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		const initial = 600 * time.Millisecond
		t0 := time.Now()
		spec := watchdog("initial:fail", ttl)
		spec.Initial = initial
		l := h.start(f, spec, t0)
		f.setErr(errUnavailable)
		sleepUntil(t0.Add(initial - time.Millisecond))
		assertActive(t, f, l)
		sleepUntil(t0.Add(initial))
		assertEnded(t, f, l, true)
	})
}
