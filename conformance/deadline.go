package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/observe"
	"github.com/dsyncgo/dsync/rwlock"
)

// The timing of the release cases, in one place so that it can be scaled.
// The holds' lease must leave room, on a loaded machine, for a release's
// deadline and grace and then a heal before it runs out.
const (
	releaseLease    = 900 * time.Millisecond // the holds' lease
	releaseDeadline = 300 * time.Millisecond // the release calls' deadline

	// releaseGrace is the contract (package dsync, "Contexts and
	// deadlines"): a release call returns by its ctx's deadline plus this,
	// or this after the call if its ctx had ended already.
	releaseGrace = 100 * time.Millisecond

	// returnSlack is added to releaseGrace, and only there, for the
	// scheduling of the returning goroutine on a loaded 2-vCPU machine:
	// the contract is releaseGrace, the check releaseGrace + returnSlack,
	// plus however long the test's process was seen not to run during the
	// call (see stallMeter).
	returnSlack = 50 * time.Millisecond

	// stallTick is how often a stallMeter looks at the clock.
	stallTick = 5 * time.Millisecond

	// expiryGranularity is how much earlier than its lease counted from
	// the acquisition's call the server may expire a hold: it keeps
	// expiries in whole milliseconds.
	expiryGranularity = 5 * time.Millisecond

	// takeOver bounds how long after a hold expired a waiting rival takes
	// it: the rival's retry is timed by the hold's TTL, not by a wake-up.
	takeOver = 300 * time.Millisecond

	// landing bounds how long after a heal a release that went on in the
	// background takes to reach the server and the lease.
	landing = 500 * time.Millisecond
)

// releasable is a primitive's handle as the release cases drive it. A unit
// is a hold (a permit of a semaphore, a group hold of a multi-lock), and
// unlock is the release call under test.
type releasable interface {
	lock(ctx context.Context) error
	tryLock(ctx context.Context) (bool, error)
	unlock(ctx context.Context, n int) error // n units at once; n > 1 only where spread says
	count(ctx context.Context) (int, error)  // the units ctx's owner holds, as the server says
	done(ctx context.Context) <-chan struct{}
}

// lockTimed takes l's hold with ctx and returns a time at or before the
// start of the take that holds it, from which its lease counts: a group
// may give a take back and take again (see groupUnits.lock).
func lockTimed(t *testing.T, l releasable, ctx context.Context) time.Time {
	t.Helper()
	sent := time.Now()
	must(t, l.lock(ctx), "lock")
	if g, ok := l.(interface{ takeBegan() time.Time }); ok && !g.takeBegan().IsZero() {
		return g.takeBegan()
	}
	return sent
}

// releaseKind is a release call the cases run against.
type releaseKind struct {
	call   string // the release call, for messages
	holds  int    // holds on the server per unit: a multi-lock's members
	spread int    // ownerless units one release gives back: more than 1 where a release spans acquisitions
	open   func(b backend.Backend, name string, c lockConfig) releasable
	rival  func(b backend.Backend, name string, c lockConfig) releasable // excludes every holder of open's
}

// releaseRules are the cases of a release call, named with prefix, for
// the table of its primitive.
func (s *suite) releaseRules(prefix string, rk releaseKind) []rule {
	cases := []struct {
		name, rule string
		fn         func(*testing.T, context.Context, releaseKind)
	}{
		{"ReleaseKeepsDeadline", "a release cut off by a partition returns by its deadline plus 100ms, matching DeadlineExceeded; the hold lasts until its lease runs out, not less, and its end is reported once", s.testReleaseKeepsDeadline},
		{"ReleaseStalledKeepsDeadline", "a release whose reply a stalled server holds returns by its deadline plus 100ms; the late reply ends the lease once, as released", s.testReleaseStalledKeepsDeadline},
		{"ReleaseAfterPartitionCountsOnce", "releases cut off by a partition, one with an ended ctx, return in time and count once each when it heals within the lease", s.testReleaseAfterPartitionCountsOnce},
		{"RelockAfterEarlyRelease", "a lock by the same owner right after a release that returned early neither re-enters the hold released nor counts the release twice", s.testRelockAfterEarlyRelease},
		{"OwnerlessReleaseKeepsDeadline", "an ownerless release cut off by a partition returns by its deadline plus 100ms, and lands when it heals", s.testOwnerlessReleaseKeepsDeadline},
	}
	rs := make([]rule, len(cases))
	for i, c := range cases {
		// Alone: a loaded server or CPU would blur the bounds, and
		// wait.Settle must not race other tests' releases.
		rs[i] = rule{prefix + c.name, c.rule + " (" + rk.call + ")", true, func(t *testing.T, ctx context.Context) { c.fn(t, ctx, rk) }}
	}
	return rs
}

// releaseRig is the stage of one release case: the holder's handle behind
// a faulty backend whose observer collects the ends of its holds, and a
// probe (the holder's primitive, for counts) and a rival on a healthy one.
type releaseRig struct {
	f      *faulty
	holder releasable
	probe  releasable
	rival  releasable
	ended  chan observe.HoldEnd
	over   atomic.Bool  // an end did not fit in ended
	muting atomic.Int64 // while a group takes its hold, when it began (Unix ns); see groupUnits.lock
	mutedN atomic.Int32 // ends dropped as a group's, for messages
}

// muteKey carries the rig's muting to groupUnits.lock.
type muteKey struct{}

// rigHolder is the holder's handle, whose lock tells a group where to
// say when it began to take its hold, so that the ends of the holds it
// takes and gives back meanwhile are not counted.
type rigHolder struct {
	releasable
	r *releaseRig
}

func (h rigHolder) lock(ctx context.Context) error {
	return h.releasable.lock(context.WithValue(ctx, muteKey{}, &h.r.muting))
}

// takeBegan forwards to a group's (see lockTimed).
func (h rigHolder) takeBegan() time.Time {
	if g, ok := h.releasable.(interface{ takeBegan() time.Time }); ok {
		return g.takeBegan()
	}
	return time.Time{}
}

func (s *suite) releaseRig(t *testing.T, rk releaseKind, c lockConfig) *releaseRig {
	c.prefix = prefix()
	f := newFaulty(s.newBackend(t))
	healthy := s.newBackend(t)
	r := &releaseRig{f: f, ended: make(chan observe.HoldEnd, 64)}
	observe.Set(f, &observe.Observer{HoldEnded: func(e observe.HoldEnd) {
		if since := r.muting.Load(); since != 0 && e.Held <= time.Since(time.Unix(0, since)) {
			// A hold the group took and gave back while it took
			// its own: not the case's.
			r.mutedN.Add(1)
			return
		}
		select { // a hook must not block
		case r.ended <- e:
		default:
			r.over.Store(true)
		}
	}})
	t.Cleanup(func() {
		// Before the backends close: let every release that went on in
		// the background end.
		f.heal()
		wait.Settle()
		observe.Set(f, nil)
	})
	r.holder = rigHolder{rk.open(f, "release", c), r}
	r.probe = rk.open(healthy, "release", c)
	r.rival = rk.rival(healthy, "release", c)
	return r
}

// awaitEnds waits for n hold ends, and fails t if one was a loss unless
// lost is allowed.
func (r *releaseRig) awaitEnds(t *testing.T, n int, d time.Duration, lost bool) {
	t.Helper()
	for i := range n {
		e := within(t, d, r.ended, fmt.Sprintf("hold end %d of %d reported (observe.HoldEnded)", i+1, n))
		t.Logf("hold end %d of %d: %+v", i+1, n, e)
		if e.Lost && !lost {
			t.Errorf("hold end reported as a loss (%s); want it released", e.Reason)
		}
	}
}

// noMoreEnds fails t if a hold end it did not expect was reported.
func (r *releaseRig) noMoreEnds(t *testing.T, when string) {
	t.Helper()
	select {
	case e := <-r.ended:
		t.Errorf("%s: a hold end reported once too often: %+v (%d ends left out before, of holds a group gave back)", when, e, r.mutedN.Load())
	default:
		if r.over.Load() {
			t.Errorf("%s: more hold ends reported than the test can hold", when)
		}
	}
}

// timedRelease runs the release call under test with ctx, which ends at
// end (now if ctx has ended already), and checks that it returned by end
// plus the grace with an error matching want.
func timedRelease(t *testing.T, h releasable, ctx context.Context, n int, want error) {
	t.Helper()
	start := time.Now()
	end := start
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		end = d
	}
	meter := meterStalls()
	err := h.unlock(ctx, n)
	took := time.Since(start)
	late := time.Since(end)
	stalled := meter.stop()
	t.Logf("release returned after %v (%v past its ctx's end; the process stalled up to %v, %v in all): %v", took.Round(time.Millisecond), late.Round(time.Millisecond), stalled.Round(time.Millisecond), meter.all.Round(time.Millisecond), err)
	if !errors.Is(err, want) {
		t.Errorf("release with the server out of reach: %v; want an error matching %v", err, want)
	}
	// The contract is releaseGrace; the rest is for the scheduler.
	if limit := releaseGrace + returnSlack + meter.stalls(); late > limit {
		t.Errorf("release returned %v after its ctx ended; the contract is %v (checked with %v of scheduling slack and the stalls seen: %v at most, %v in all)", late.Round(time.Millisecond), releaseGrace, returnSlack, stalled.Round(time.Millisecond), meter.all.Round(time.Millisecond))
	}
	if late < 0 {
		t.Errorf("release returned %v before its deadline with %v", -late, err)
	}
}

// stallMeter measures the longest time a sleeping goroutine of the test's
// process waited past its wake-up: on a loaded machine the whole process
// may wait for a CPU, or the runtime for its threads, and a bound checked
// from inside it must allow for that, but only for that. A release that
// overran its bound by itself shows no stall.
type stallMeter struct {
	quit  chan struct{}
	done  chan struct{}
	worst time.Duration
	all   time.Duration // the sum of the stalls past a millisecond (see all)
}

func meterStalls() *stallMeter {
	m := &stallMeter{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.quit:
				return
			default:
			}
			start := time.Now()
			time.Sleep(stallTick)
			over := time.Since(start) - stallTick
			m.worst = max(m.worst, over)
			if over > time.Millisecond {
				m.all += over - time.Millisecond
			}
		}
	}()
	return m
}

// stop ends the measure and returns the longest stall seen.
func (m *stallMeter) stop() time.Duration {
	close(m.quit)
	<-m.done
	return m.worst
}

// stalls returns, once stop has, the longest stall or the sum of them
// all, whichever is more: a path of several steps (the ctx's timer, the
// wake-up of the call that waits on it, its return), each of which a
// loaded machine may hold up in turn, may be late by the sum, where the
// longest allows for one step.
func (m *stallMeter) stalls() time.Duration { return max(m.worst, m.all) }

// stallAllowance caps what loadAllowance allows for the meter's stalls.
// They grow with the wait they are measured over, a wait late by a defect
// included: uncapped, on a machine where each sample overran by a few ms,
// they would excuse a hand-off seconds late. A missed wake-up costs a
// heartbeat (a second and more), past any bound with this.
const stallAllowance = 300 * time.Millisecond

// loadAllowance is what a bound on a hand-off allows for a loaded machine,
// given the longest round trip m timed (slow): three of those, or the
// stalls m saw, up to stallAllowance, whichever is more. A path of several
// steps may be held up at each, where the longest round trip allows for
// one.
func loadAllowance(slow time.Duration, m *tripmeter.Meter) time.Duration {
	return max(3*slow, min(m.Stalled(), stallAllowance))
}

// withinTrips fails t if c is not closed within d and twice the longest
// round trip m has timed by then (see tripmeter.Meter): a bound on something
// that takes a round trip or two, where d alone fits an idle machine.
func withinTrips(t *testing.T, d time.Duration, c <-chan struct{}, m *tripmeter.Meter, what string) {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-c:
			return
		case <-tick.C:
		}
		if limit := d + 2*m.Longest(); time.Since(start) > limit || i > 100000 {
			t.Fatalf("%s: nothing within %v (%v, and twice the longest round trip timed meanwhile)", what, limit, d)
		}
	}
}

// medianTrip returns the median of 11 round trips to the server through b.
func medianTrip(t *testing.T, ctx context.Context, b backend.Backend) time.Duration {
	t.Helper()
	trips := make([]time.Duration, 11)
	for i := range trips {
		start := time.Now()
		_, err := b.Eval(ctx, tripmeter.Ping, nil)
		must(t, err, "ping")
		trips[i] = time.Since(start)
	}
	slices.Sort(trips)
	return trips[len(trips)/2]
}

// awaitCount waits until ctx's owner holds n units, as the server says.
func awaitCount(t *testing.T, ctx context.Context, h releasable, n int, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for i := 0; ; i++ {
		got, err := h.count(ctx)
		must(t, err, "count")
		if got == n {
			return
		}
		if got < n || time.Now().After(deadline) || i > 5000 {
			t.Fatalf("%s: the owner holds %d, want %d", what, got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func isOpen(c <-chan struct{}) bool {
	select {
	case <-c:
		return false
	default:
		return true
	}
}

// A partition cuts the holder off before it releases: the call returns in
// time, the release going on in the background; nothing reaches the
// server, so the hold expires at its lease's end (renewals fail too), and
// a waiting rival takes it then and not before. The holder is told (Done)
// then, and its observer once. A release that reaches the server
// after the partition heals finds the rival's hold, not its own, and
// leaves it.
func (s *suite) testReleaseKeepsDeadline(t *testing.T, ctx context.Context, rk releaseKind) {
	r := s.releaseRig(t, rk, lockConfig{watchdog: releaseLease})
	o := dsync.WithOwner(ctx)
	sent := lockTimed(t, r.holder, o)
	done := r.holder.done(o)
	r.f.start(partition)
	dctx, cancel := context.WithTimeout(o, releaseDeadline)
	defer cancel()
	timedRelease(t, r.holder, dctx, 1, context.DeadlineExceeded)

	ro := dsync.WithOwner(ctx)
	rctx, rcancel := context.WithTimeout(ro, releaseLease+takeOver+time.Second)
	defer rcancel()
	// The rival's take-over is a timer and a round trip: the bound allows
	// twice the longest timed meanwhile (see tripmeter.Meter), for a
	// machine or a server that the suite's other cases keep busy.
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	must(t, r.rival.lock(rctx), "the rival's lock")
	took, slow := time.Since(sent), trips.Stop()
	t.Logf("the rival acquired %v after the hold was taken with a lease of %v (longest round trip meanwhile %v)", took.Round(time.Millisecond), releaseLease, slow)
	if took < releaseLease-expiryGranularity {
		t.Errorf("the rival acquired %v after the hold was taken, before its lease of %v ran out", took, releaseLease)
	}
	if took > releaseLease+takeOver+2*slow {
		t.Errorf("the rival acquired %v after the hold was taken, more than %v after its lease of %v ran out, and twice %v for the longest round trip timed meanwhile", took, takeOver, releaseLease, slow)
	}
	// Done closes a margin before the server's expiry, when the scheduler
	// runs on time; on a loaded machine it may run later than the rival.
	within(t, takeOver, done, "Done of the hold cut off, past its lease")
	r.awaitEnds(t, rk.holds, takeOver, true)

	r.f.heal()
	wait.Settle()
	if n, err := r.rival.count(ro); err != nil || n != 1 {
		t.Errorf("after the heal the rival holds %d, %v; want 1: a late release took the next holder's hold", n, err)
	}
	r.noMoreEnds(t, "after the late release")
	must(t, r.rival.unlock(ro, 1), "the rival's unlock")
}

// A stalled server applies the release and holds its reply: the call
// returns in time, not knowing; the hold is free on the server, so a rival
// takes it at once. When the reply comes the lease ends, as released, and
// the observer hears of it once.
func (s *suite) testReleaseStalledKeepsDeadline(t *testing.T, ctx context.Context, rk releaseKind) {
	// A longer lease, which costs no time (nothing waits for it to run
	// out): the rival's try must come while the lease is on, or it cannot
	// tell a release from an expiry, and on a loaded machine the hold, the
	// release and the try took 1.3s in a CI run.
	const lease = 3 * releaseLease
	r := s.releaseRig(t, rk, lockConfig{watchdog: lease})
	o := dsync.WithOwner(ctx)
	sent := lockTimed(t, r.holder, o)
	done := r.holder.done(o)
	r.f.start(stall)
	dctx, cancel := context.WithTimeout(o, releaseDeadline)
	defer cancel()
	timedRelease(t, r.holder, dctx, 1, context.DeadlineExceeded)

	ro := dsync.WithOwner(ctx)
	if ok, err := r.rival.tryLock(ro); !ok || err != nil {
		t.Fatalf("the rival's try after a release the server applied = %v, %v; want the hold", ok, err)
	}
	if took := time.Since(sent); took >= lease {
		t.Fatalf("the rival acquired %v after the hold was taken, past its lease of %v: too slow to tell", took, lease)
	}
	r.f.heal()
	within(t, landing, done, "Done once the stalled reply came")
	r.awaitEnds(t, rk.holds, landing, false)
	wait.Settle()
	r.noMoreEnds(t, "after the release")
	must(t, r.rival.unlock(ro, 1), "the rival's unlock")
}

// A reentrant hold of three, two releases cut off by a partition: one
// with a deadline, one with a ctx that had ended already (the deferred
// unlock of a request that ended), which still releases. Both return in
// time. The partition heals within the lease: each release counts once
// (3 → 1), the hold stays (its watchdog renews it past its first lease),
// and the last unlock frees it.
func (s *suite) testReleaseAfterPartitionCountsOnce(t *testing.T, ctx context.Context, rk releaseKind) {
	// A third longer than releaseLease: the two releases must return
	// within half of it, and on a loaded machine they took 767ms in a CI
	// run. The case waits out one lease, so each third costs 300ms.
	const lease = releaseLease * 4 / 3
	r := s.releaseRig(t, rk, lockConfig{watchdog: lease})
	o := dsync.WithOwner(ctx)
	for range 3 {
		must(t, r.holder.lock(o), "lock")
	}
	held := time.Now()
	r.f.start(partition)
	dctx, cancel := context.WithTimeout(o, releaseDeadline)
	defer cancel()
	timedRelease(t, r.holder, dctx, 1, context.DeadlineExceeded)
	cctx, ccancel := context.WithCancel(o)
	ccancel()
	timedRelease(t, r.holder, cctx, 1, context.Canceled)
	if d := time.Since(held); d > lease/2+releaseDeadline {
		t.Fatalf("the releases took %v of a lease of %v: too slow to heal within it", d, lease)
	}
	r.f.heal()
	awaitCount(t, o, r.probe, 1, landing, "after the heal")
	// The hold left (a multi-lock's Done is its group hold's, which the
	// releases took; a lock's is the owner's, which they must not end).
	done := r.holder.done(o)

	// Past the hold's first lease (time is what is tested): renewed.
	time.Sleep(time.Until(held.Add(lease + 100*time.Millisecond)))
	if n, err := r.probe.count(o); err != nil || n != 1 {
		t.Errorf("past the first lease the owner holds %d, %v; want 1", n, err)
	}
	if !isOpen(done) {
		t.Error("Done closed while the owner still holds")
	}
	if ok, err := r.rival.tryLock(dsync.WithOwner(ctx)); ok || err != nil {
		t.Errorf("the rival's try while the owner holds = %v, %v; want false", ok, err)
	}
	r.noMoreEnds(t, "while held")

	must(t, r.holder.unlock(o, 1), "the last unlock")
	within(t, time.Second, done, "Done after the last unlock")
	r.awaitEnds(t, rk.holds, time.Second, false)
	if err := r.holder.unlock(o, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("one unlock too many: %v, want ErrNotHeld", err)
	}
	ro := dsync.WithOwner(ctx)
	if ok, err := r.rival.tryLock(ro); !ok || err != nil {
		t.Fatalf("the rival's try after the last unlock = %v, %v; want the hold", ok, err)
	}
	must(t, r.rival.unlock(ro, 1), "the rival's unlock")
	wait.Settle()
	r.noMoreEnds(t, "after the last unlock")
}

// A stalled release returns early, the server having applied it; the
// owner locks again at once, while the release's reply is still held, and
// its lock's reply comes first. Holding one, the lock takes a new hold,
// which the late reply leaves alone; holding two, it re-enters the one
// left (1 → 2), and the late reply does not count the release again.
// Fixed leases: no renewal is held with the release.
func (s *suite) testRelockAfterEarlyRelease(t *testing.T, ctx context.Context, rk releaseKind) {
	for _, k := range []int{1, 2} {
		t.Run(fmt.Sprintf("Holding%d", k), func(t *testing.T) {
			// A longer lease: what is tested is the late reply, which
			// must come before the lease ends (with releaseLease, a
			// multi-lock's members expired first on rueidis in a CI run).
			r := s.releaseRig(t, rk, lockConfig{fixed: 3 * releaseLease})
			o := dsync.WithOwner(ctx)
			for range k {
				must(t, r.holder.lock(o), "lock")
			}
			r.f.start(stall)
			dctx, cancel := context.WithTimeout(o, releaseDeadline)
			defer cancel()
			timedRelease(t, r.holder, dctx, 1, context.DeadlineExceeded)
			// Each hold's release attempt, and its retry in the
			// background, both applied, their replies held.
			r.f.awaitHeld(t, 2*rk.holds, time.Second)
			r.f.admit()
			must(t, r.holder.lock(o), "lock again, the release's reply held")
			r.f.heal()
			wait.Settle()

			if n, err := r.probe.count(o); err != nil || n != k {
				t.Errorf("after the late reply the owner holds %d, %v; want %d", n, err, k)
			}
			done := r.holder.done(o)
			if !isOpen(done) {
				t.Error("the late reply of the release ended the owner's hold")
			}
			if k == 1 {
				r.awaitEnds(t, rk.holds, time.Second, false) // the hold released
			}
			r.noMoreEnds(t, "before the unlocks")
			for range k {
				must(t, r.holder.unlock(o, 1), "unlock")
			}
			within(t, time.Second, done, "Done after the last unlock")
			if err := r.holder.unlock(o, 1); !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("one unlock too many: %v, want ErrNotHeld", err)
			}
			ro := dsync.WithOwner(ctx)
			if ok, err := r.rival.tryLock(ro); !ok || err != nil {
				t.Fatalf("the rival's try after the last unlock = %v, %v; want the hold", ok, err)
			}
			must(t, r.rival.unlock(ro, 1), "the rival's unlock")
		})
	}
}

// An ownerless release cut off by a partition returns in time, and lands
// when the partition heals within the lease. Where a release spans
// ownerless acquisitions (a semaphore's Release(n)), it gives back
// several at once, and still returns in time.
func (s *suite) testOwnerlessReleaseKeepsDeadline(t *testing.T, ctx context.Context, rk releaseKind) {
	// What is tested is the release's return and landing, not an expiry:
	// a longer lease keeps the holds alive through the partition on a
	// loaded machine (with releaseLease, a multi-lock's member was lost
	// before the heal beside two CPU hogs on rueidis).
	r := s.releaseRig(t, rk, lockConfig{watchdog: 3 * releaseLease})
	n := max(rk.spread, 1)
	dones := make([]<-chan struct{}, n)
	for i := range n {
		must(t, r.holder.lock(ctx), "ownerless lock")
		dones[i] = r.holder.done(ctx)
	}
	r.f.start(partition)
	dctx, cancel := context.WithTimeout(ctx, releaseDeadline)
	defer cancel()
	timedRelease(t, r.holder, dctx, n, context.DeadlineExceeded)
	ro := dsync.WithOwner(ctx)
	if ok, err := r.rival.tryLock(ro); ok || err != nil {
		t.Fatalf("the rival's try before the heal = %v, %v; want false: nothing reached the server", ok, err)
	}
	r.f.heal()
	for i, done := range dones {
		within(t, landing, done, fmt.Sprintf("Done of ownerless hold %d once the release landed", i+1))
	}
	r.awaitEnds(t, n*rk.holds, landing, false)
	if ok, err := r.rival.tryLock(ro); !ok || err != nil {
		t.Fatalf("the rival's try after the release landed = %v, %v; want the hold", ok, err)
	}
	must(t, r.rival.unlock(ro, 1), "the rival's unlock")
	wait.Settle()
	r.noMoreEnds(t, "after the release")
}

// The release calls: each primitive's, as its table runs them.

// exclusiveUnits is an exclusive lock's handle: UnlockContext.
type exclusiveUnits struct{ exclusiveLock }

func (e exclusiveUnits) lock(ctx context.Context) error            { return e.LockContext(ctx) }
func (e exclusiveUnits) tryLock(ctx context.Context) (bool, error) { return e.TryLockContext(ctx) }
func (e exclusiveUnits) count(ctx context.Context) (int, error)    { return e.HoldCount(ctx) }
func (e exclusiveUnits) done(ctx context.Context) <-chan struct{}  { return e.Done(ctx) }
func (e exclusiveUnits) unlock(ctx context.Context, n int) error   { one(n); return e.UnlockContext(ctx) }

func one(n int) {
	if n != 1 {
		panic(fmt.Sprintf("conformance: release of %d units at once", n))
	}
}

func (k lockKind) releases() releaseKind {
	open := func(b backend.Backend, name string, c lockConfig) releasable {
		return exclusiveUnits{k.open(b, name, c)}
	}
	return releaseKind{call: k.kind + " UnlockContext", holds: 1, spread: 1, open: open, rival: open}
}

// readUnits is an rwlock's read side: RUnlockContext. Its rival is a
// writer.
type readUnits struct{ *rwlock.RWMutex }

func (r readUnits) lock(ctx context.Context) error            { return r.RLockContext(ctx) }
func (r readUnits) tryLock(ctx context.Context) (bool, error) { return r.TryRLockContext(ctx) }
func (r readUnits) done(ctx context.Context) <-chan struct{}  { return r.RDone(ctx) }
func (r readUnits) unlock(ctx context.Context, n int) error   { one(n); return r.RUnlockContext(ctx) }

func (r readUnits) count(ctx context.Context) (int, error) {
	st, err := r.State(ctx)
	return st.ReadCount, err
}

var rwReadReleases = releaseKind{
	call: "rwlock RUnlockContext", holds: 1, spread: 1,
	open: func(b backend.Backend, name string, c lockConfig) releasable {
		return readUnits{newRWLock(b, name, c)}
	},
	rival: func(b backend.Backend, name string, c lockConfig) releasable {
		return exclusiveUnits{writeSide{newRWLock(b, name, c)}}
	},
}
