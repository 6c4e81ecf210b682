package conformance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/internal/options"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/semaphore"
)

// semaphoreTests are the cases of the counting semaphore: the capacity,
// leased permits, the order that keeps large requests from starving, the
// hand-off to several waiters, releases, and runtime capacity.
func (s *suite) semaphoreRules() []rule {
	return append([]rule{
		{"CapacityNeverExceeded", "never more permits held than the capacity, across processes; all come back, leaving no key", true, s.testSemCapacity},
		{"LargeRequestNotStarved", "a large request behind a stream of small ones is served: later requests wait behind it", true, s.testSemLargeNotStarved},
		{"HandOffToSeveral", "one release hands permits to every queued waiter that fits, in queue order, through pub/sub", false, s.testSemHandOffSeveral},
		{"CrashedHolderPermitsReturn", "a crashed holder's permits come back when its lease ends, and its Done closes", false, s.testSemCrashedHolder},
		{"WatchdogKeepsPermits", "the watchdog keeps a live holder's permits past its lease", false, s.testSemWatchdog},
		{"LostSignal", "deleting the semaphore's state fires Done at the next renewal; a release then is ErrNotHeld", false, s.testSemLostSignal},
		{"ReleaseMisuse", "releasing more than held, or without holding, is ErrNotHeld and releases nothing", false, s.testSemReleaseMisuse},
		{"AmbiguousRelease", "a release retried after a lost reply is applied once", false, s.testSemAmbiguousRelease},
		{"OwnerlessReleases", "ownerless permits are given back through the handle from any goroutine, oldest acquisition first", false, s.testSemOwnerless},
		{"AbandonedWait", "a waiter whose ctx ends leaves the queue at once, and the request behind it is served", false, s.testSemAbandonedWait},
		{"SetCapacity", "a lowered capacity revokes nothing; a raised one serves waiters at once; a request above it fails", false, s.testSemSetCapacity},
		{"CapacityMismatch", "a handle whose capacity differs from the semaphore's fails with ErrCapacityMismatch until a capacity is set at runtime", false, s.testSemMismatch},
		{"BadInput", "bad input is a sentinel error before any I/O; a request above the capacity in force is ErrInvalidPermits", false, s.testSemBadInput},
	}, s.releaseRules("", semReleases)...)
}

// semFreeTTL bounds how long a free semaphore keeps its grant counter:
// the rest of its last holder's lease, at most the default watchdog's.
const semFreeTTL = options.DefaultWatchdogLease

func semOpen(b backend.Backend, p string, capacity int64, opts ...semaphore.Option) *semaphore.Semaphore {
	return semaphore.New(b, "sem", capacity, append([]semaphore.Option{semaphore.WithPrefix(p)}, opts...)...)
}

// semAwait waits until probe's state satisfies ok, for at most 5s.
func semAwait(t *testing.T, ctx context.Context, probe *semaphore.Semaphore, what string, ok func(semaphore.State) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		st, err := probe.State(ctx)
		must(t, err, "state")
		if ok(st) {
			return
		}
		if time.Now().After(deadline) || i > 5000 {
			t.Fatalf("%s: not within 5s (state %+v)", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

func semQueued(n int) func(semaphore.State) bool {
	return func(st semaphore.State) bool { return st.Queued >= n }
}

// Capacity 3; 10 backends, as 10 processes, with 2 goroutines each
// acquiring 1 or 2 permits for 3s: the permits counted inside never exceed
// 3, and reach 3. No key is left when all are given back.
func (s *suite) testSemCapacity(t *testing.T, ctx context.Context) {
	p := prefix()
	var (
		inside, peak, rounds atomic.Int64
		wg                   sync.WaitGroup
	)
	stop := time.Now().Add(3 * time.Second)
	for i := range 10 {
		sem := semOpen(s.newBackend(t), p, 3)
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := int64(1 + (i+g)%2)
				for j := 0; time.Now().Before(stop) && j < 100000; j++ {
					if err := sem.Acquire(ctx, n); err != nil {
						t.Error(err)
						return
					}
					now := inside.Add(n)
					if now > 3 {
						t.Errorf("%d permits held at once, capacity 3", now)
					}
					for old := peak.Load(); now > old && !peak.CompareAndSwap(old, now); old = peak.Load() {
					}
					time.Sleep(time.Millisecond)
					inside.Add(-n)
					if err := sem.Release(ctx, n); err != nil {
						t.Error(err)
						return
					}
					rounds.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d acquisitions in 3s, peak %d permits", rounds.Load(), peak.Load())
	if peak.Load() != 3 {
		t.Errorf("peak %d permits held, want 3", peak.Load())
	}
	assertNoKeys(t, ctx, s.newBackend(t), p, semKey(p), semFreeTTL)
}

// An Acquire(3) behind a stream of Acquire(1)/Release(1) from 6
// goroutines acquires within 1s: small requests arriving after it wait
// behind it.
func (s *suite) testSemLargeNotStarved(t *testing.T, ctx context.Context) {
	p := prefix()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rounds atomic.Int64
	for range 6 {
		sem := semOpen(s.newBackend(t), p, 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100000; j++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := sem.Acquire(ctx, 1); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
				if err := sem.Release(ctx, 1); err != nil {
					t.Error(err)
					return
				}
				rounds.Add(1)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for rounds.Load() < 30 { // the stream runs
		time.Sleep(time.Millisecond)
	}
	big := semOpen(s.newBackend(t), p, 3)
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, s.bound(5*time.Second))
	defer cancel()
	must(t, big.Acquire(actx, 3), "Acquire(3)")
	d := time.Since(start)
	t.Logf("Acquire(3) behind 6 streams of 1: %v (%d small acquisitions before)", d, rounds.Load())
	if d > s.bound(time.Second) {
		t.Errorf("Acquire(3) took %v behind a stream of small requests, want within %v", d, s.bound(time.Second))
	}
	must(t, big.Release(ctx, 3), "Release(3)")
}

// One release hands permits to every queued waiter that fits, through
// pub/sub, in queue order, each within 50ms; a head that does not fit
// blocks the smaller request behind it.
func (s *suite) testSemHandOffSeveral(t *testing.T, ctx context.Context) {
	p := prefix()
	probe := s.newBackend(t)
	holder := semOpen(elsewhere{probe}, p, 4)
	must(t, holder.Acquire(ctx, 4), "holder")
	type res struct {
		i  int
		at time.Time
	}
	got := make(chan res, 4)
	wants := []int64{1, 2, 3, 1}
	sems := make([]*semaphore.Semaphore, len(wants))
	for i, n := range wants {
		sems[i] = semOpen(s.newBackend(t), p, 4)
		go func() {
			if err := sems[i].Acquire(ctx, n); err != nil {
				t.Error(err)
			}
			got <- res{i, time.Now()}
		}()
		semAwait(t, ctx, holder, "waiter queued", semQueued(i+1))
	}
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	released := time.Now()
	must(t, holder.Release(ctx, 4), "release")
	var first [2]res
	for j := range first {
		first[j] = within(t, s.bound(5*time.Second), got, "waiters 0 and 1")
		if first[j].i > 1 {
			t.Fatalf("waiter %d (wants %d) served before waiters 0 and 1", first[j].i, wants[first[j].i])
		}
	}
	slow := trips.Stop()
	for _, r := range first {
		if d := r.at.Sub(released); d > s.bound(50*time.Millisecond)+loadAllowance(slow, trips) {
			t.Errorf("waiter %d acquired %v after the release, want within %v, and %v more for the longest round trip timed meanwhile, three times (or the meter's stalls, %v, if more, up to %v)", r.i, d, s.bound(50*time.Millisecond), slow, trips.Stalled(), stallAllowance)
		}
	}
	// 3 held: waiter 2 (3) does not fit, and waiter 3 (1) waits behind it.
	select {
	case r := <-got:
		t.Fatalf("waiter %d acquired past a head that does not fit", r.i)
	case <-time.After(100 * time.Millisecond):
	}
	must(t, sems[0].Release(ctx, 1), "release 0")
	must(t, sems[1].Release(ctx, 2), "release 1")
	for range 2 {
		within(t, s.bound(5*time.Second), got, "waiters 2 and 3")
	}
	must(t, sems[2].Release(ctx, 3), "release 2")
	must(t, sems[3].Release(ctx, 1), "release 3")
	assertNoKeys(t, ctx, probe, p, semKey(p), semFreeTTL)
}

// A holder that crashes (its backend closed, no release) on a fixed lease
// gets its permits back when the lease ends: a waiter acquires them within
// lease + 200ms, and the crashed holder's Done closes.
func (s *suite) testSemCrashedHolder(t *testing.T, ctx context.Context) {
	const leaseD = 500 * time.Millisecond
	p := prefix()
	hb := s.newBackend(t)
	holder := semOpen(hb, p, 3, semaphore.WithLease(leaseD), semaphore.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	must(t, holder.Acquire(o, 2), "holder")
	acquired := time.Now()
	// The waiter's last attempt is a round trip: the bound allows twice
	// the longest timed meanwhile (see tripmeter.Meter).
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	done := holder.Done(o)
	hb.Close()
	w := semOpen(s.newBackend(t), p, 3)
	must(t, w.Acquire(ctx, 3), "waiter")
	d, slow := time.Since(acquired), trips.Stop()
	t.Logf("crashed holder's permits back after %v (lease %v; longest round trip meanwhile %v)", d, leaseD, slow)
	if d > leaseD+s.bound(200*time.Millisecond)+2*slow {
		t.Errorf("permits back after %v, want within the lease %v + %v, and twice %v for the longest round trip timed meanwhile", d, leaseD, s.bound(200*time.Millisecond), slow)
	}
	within(t, s.bound(time.Second), done, "crashed holder's Done")
	must(t, w.Release(ctx, 3), "release")
	assertNoKeys(t, ctx, s.newBackend(t), p, semKey(p), semFreeTTL)
}

// A live holder on a 1s watchdog lease keeps its permits for 4s.
func (s *suite) testSemWatchdog(t *testing.T, ctx context.Context) {
	const leaseD = time.Second
	// A hold is lost, as it should be, when its renewals go unanswered
	// for the two thirds of the lease left when they fall due: a machine
	// that holds up every exchange with the server that long (miniredis
	// under -race, packages in parallel) makes the attempt inconclusive.
	// Such an attempt, and only such, is made once more.
	for attempt := 1; ; attempt++ {
		stall, lost := s.semWatchdogHolds(t, ctx, leaseD)
		if !lost {
			return
		}
		if stall < 2*leaseD/3 {
			t.Fatalf("Done closed while the watchdog renews (longest stall of an exchange with the server meanwhile %v)", stall)
		}
		if attempt == 2 {
			t.Fatalf("Done closed while the watchdog renews, in two attempts; the machine held up an exchange with the server for %v", stall)
		}
		t.Logf("Done closed while the machine held up an exchange with the server for %v, two thirds of the lease or more: once more", stall)
	}
}

// semWatchdogHolds holds two permits on a leaseD watchdog lease for four
// leases, and returns the longest stall of an exchange with the server
// meanwhile (see tripmeter.Meter) and whether the hold was lost.
func (s *suite) semWatchdogHolds(t *testing.T, ctx context.Context, leaseD time.Duration) (time.Duration, bool) {
	p := prefix()
	holder := semOpen(s.newBackend(t), p, 2, semaphore.WithWatchdog(leaseD))
	other := semOpen(s.newBackend(t), p, 2)
	o := dsync.WithOwner(ctx)
	must(t, holder.Acquire(o, 1), "holder")
	must(t, holder.Acquire(o, 1), "holder again") // one hold, two permits
	done := holder.Done(o)
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	end := time.Now().Add(4 * leaseD)
	for i := 0; time.Now().Before(end) && i < 100; i++ {
		select {
		case <-done:
			return trips.Stop(), true
		default:
		}
		ok, err := other.TryAcquire(ctx, 1)
		must(t, err, "another owner's TryAcquire")
		if ok {
			// The hold is gone from the server: the renewal that finds
			// it gone closes Done.
			must(t, other.Release(ctx, 1), "another owner's release")
			within(t, s.bound(leaseD), done, "Done after another owner acquired")
			return trips.Stop(), true
		}
		select {
		case <-done:
			return trips.Stop(), true
		case <-time.After(200 * time.Millisecond):
		}
	}
	stall := trips.Stop()
	st, err := holder.State(o)
	must(t, err, "state")
	if st.Permits == 0 && st.Holders == 0 {
		// Gone since the last look, as above: the renewal that finds it
		// gone closes Done, and the stall tells whether it may.
		within(t, s.bound(leaseD), done, "Done after the permits were found gone")
		return stall, true
	}
	if st.Permits != 2 || st.Holders != 1 {
		t.Errorf("after 4 leases: %+v, want the owner's 2 permits in one hold", st)
	}
	must(t, holder.Release(o, 2), "release")
	within(t, s.bound(time.Second), done, "Done after the release")
	return stall, false
}

// Deleting the semaphore's state takes the permits: the watchdog's next
// renewal closes Done, and a release then reports ErrNotHeld.
func (s *suite) testSemLostSignal(t *testing.T, ctx context.Context) {
	p := prefix()
	b := s.newBackend(t)
	sem := semOpen(b, p, 2, semaphore.WithWatchdog(300*time.Millisecond), semaphore.WithLogger(nil))
	must(t, sem.Acquire(ctx, 1), "acquire")
	done := sem.Done(ctx)
	key := "semaphore:{sem}"
	_, err := b.Eval(ctx, delScript, []string{p + ":" + key, p + ":" + key + ":holders"})
	must(t, err, "DEL")
	within(t, s.bound(2*time.Second), done, "Done after the state was deleted")
	if err := sem.Release(ctx, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Release of lost permits = %v, want ErrNotHeld", err)
	}
	assertNoKeys(t, ctx, b, p, semKey(p), semFreeTTL)
}

// Releasing more than the owner holds, or without holding, is ErrNotHeld
// and releases nothing.
func (s *suite) testSemReleaseMisuse(t *testing.T, ctx context.Context) {
	p := prefix()
	sem := semOpen(s.newBackend(t), p, 5)
	o := dsync.WithOwner(ctx)
	if err := sem.Release(o, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Release unheld = %v, want ErrNotHeld", err)
	}
	must(t, sem.Acquire(o, 2), "acquire")
	if err := sem.Release(o, 3); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Release(3) of 2 held = %v, want ErrNotHeld", err)
	}
	st, err := sem.State(o)
	must(t, err, "state")
	if st.Permits != 2 || st.Held != 2 {
		t.Errorf("after a refused release: %+v, want 2 held", st)
	}
	other := dsync.WithOwner(ctx)
	if err := sem.Release(other, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Release by another owner = %v, want ErrNotHeld", err)
	}
	must(t, sem.Release(o, 1), "release 1")
	must(t, sem.Release(o, 1), "release 1")
	if err := sem.Release(o, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("a third Release(1) of 2 = %v, want ErrNotHeld", err)
	}
	assertNoKeys(t, ctx, s.newBackend(t), p, semKey(p), semFreeTTL)
}

// A release whose reply is lost is retried with the same operation id and
// applied once.
func (s *suite) testSemAmbiguousRelease(t *testing.T, ctx context.Context) {
	p := prefix()
	sp := newSpy(s.newBackend(t))
	sem := semOpen(sp, p, 5)
	o := dsync.WithOwner(ctx)
	must(t, sem.Acquire(o, 3), "acquire")
	sp.loseReplies(1)
	must(t, sem.Release(o, 1), "release with its reply lost")
	st, err := sem.State(o)
	must(t, err, "state")
	if st.Permits != 2 {
		t.Errorf("after one Release(1) of 3, retried: %d permits held, want 2", st.Permits)
	}
	sp.loseReplies(1)
	must(t, sem.Release(o, 2), "final release with its reply lost")
	within(t, s.bound(time.Second), sem.Done(o), "Done after the final release")
	assertNoKeys(t, ctx, sp, p, semKey(p), semFreeTTL)
}

// Ownerless permits are given back through the handle from any goroutine,
// oldest acquisition first, over several acquisitions.
func (s *suite) testSemOwnerless(t *testing.T, ctx context.Context) {
	p := prefix()
	sem := semOpen(s.newBackend(t), p, 4)
	must(t, sem.Acquire(ctx, 3), "acquire 3")
	must(t, sem.Acquire(ctx, 1), "acquire 1")
	done := make(chan error)
	go func() { done <- sem.Release(ctx, 2) }() // from another goroutine
	must(t, <-done, "release 2")
	st, err := sem.State(ctx)
	must(t, err, "state")
	if st.Held != 2 || st.Holders != 2 {
		t.Errorf("after Release(2) of 3+1: %+v, want 2 held by 2 owners", st)
	}
	must(t, sem.Release(ctx, 2), "release 2 over two acquisitions")
	if err := sem.Release(ctx, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Release with nothing held = %v, want ErrNotHeld", err)
	}
	other := semOpen(s.newBackend(t), p, 4)
	must(t, sem.Acquire(ctx, 1), "acquire")
	if err := other.Release(ctx, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("ownerless Release through another handle = %v, want ErrNotHeld", err)
	}
	must(t, sem.Release(ctx, 1), "release")
	assertNoKeys(t, ctx, s.newBackend(t), p, semKey(p), semFreeTTL)
}

// A waiter whose ctx ends leaves the queue at once, and a request behind
// it is served.
func (s *suite) testSemAbandonedWait(t *testing.T, ctx context.Context) {
	p := prefix()
	holder := semOpen(s.newBackend(t), p, 3)
	must(t, holder.Acquire(ctx, 2), "holder")
	big := semOpen(s.newBackend(t), p, 3)
	bctx, cancel := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() { gave <- big.Acquire(bctx, 3) }()
	semAwait(t, ctx, holder, "big queued", semQueued(1))
	small := semOpen(s.newBackend(t), p, 3)
	got := make(chan error, 1)
	go func() { got <- small.Acquire(ctx, 1) }()
	semAwait(t, ctx, holder, "small queued", semQueued(2))
	cancel()
	if err := within(t, s.bound(5*time.Second), gave, "big gives up"); !errors.Is(err, context.Canceled) {
		t.Errorf("abandoned Acquire = %v, want context.Canceled", err)
	}
	must(t, within(t, s.bound(time.Second), got, "small served once big left"), "small")
	must(t, small.Release(ctx, 1), "release small")
	must(t, holder.Release(ctx, 2), "release holder")
	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer dcancel()
	if err := big.Acquire(dctx, 3); err != nil {
		t.Errorf("Acquire(3) on a free semaphore: %v", err)
	} else {
		must(t, big.Release(ctx, 3), "release")
	}
	assertNoKeys(t, ctx, s.newBackend(t), p, semKey(p), semFreeTTL)
}

// A lowered capacity revokes nothing and admits nobody until the permits
// held fall below it; a raised one serves waiters at once; a waiter asking
// for more than the capacity fails.
func (s *suite) testSemSetCapacity(t *testing.T, ctx context.Context) {
	p := prefix()
	admin := semOpen(s.newBackend(t), p, 4)
	holder := semOpen(s.newBackend(t), p, 4)
	o := dsync.WithOwner(ctx)
	must(t, holder.Acquire(o, 3), "holder")
	must(t, admin.SetCapacity(ctx, 2), "lower to 2")
	st, err := admin.State(ctx)
	must(t, err, "state")
	if st.Capacity != 2 || !st.Set || st.Held != 3 || st.Available != 0 {
		t.Errorf("lowered below the held permits: %+v, want capacity 2 (set), 3 held, 0 available", st)
	}
	w1 := semOpen(s.newBackend(t), p, 4)
	got1 := make(chan error, 1)
	go func() { got1 <- w1.Acquire(ctx, 1) }()
	semAwait(t, ctx, admin, "waiter queued", semQueued(1))
	must(t, holder.Release(o, 1), "release 1 (2 held of 2)")
	select {
	case err := <-got1:
		t.Fatalf("a waiter acquired with 2 held of capacity 2: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	must(t, holder.Release(o, 1), "release 1 (1 held of 2)")
	must(t, within(t, s.bound(time.Second), got1, "waiter once below the capacity"), "waiter")
	// 2 held of 2. A waiter for 3 fails when the capacity is lowered
	// under its request.
	must(t, admin.SetCapacity(ctx, 3), "raise to 3")
	w3 := semOpen(s.newBackend(t), p, 4)
	got3 := make(chan error, 1)
	go func() { got3 <- w3.Acquire(ctx, 3) }()
	semAwait(t, ctx, admin, "waiter for 3 queued", semQueued(1))
	must(t, admin.SetCapacity(ctx, 2), "lower to 2 under a waiter for 3")
	if err := within(t, s.bound(2*time.Second), got3, "waiter above the capacity"); !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("waiting Acquire(3) after the capacity fell to 2 = %v, want ErrInvalidPermits", err)
	}
	// A raised capacity serves a waiter at once.
	w2 := semOpen(s.newBackend(t), p, 4)
	got2 := make(chan error, 1)
	go func() { got2 <- w2.Acquire(ctx, 2) }()
	semAwait(t, ctx, admin, "waiter for 2 queued", semQueued(1))
	must(t, admin.SetCapacity(ctx, 4), "raise to 4")
	must(t, within(t, s.bound(time.Second), got2, "waiter after the raise"), "waiter for 2")
	must(t, admin.SetCapacity(ctx, 0), "clear")
	if c, err := admin.Capacity(ctx); err != nil || c != 4 {
		t.Errorf("capacity after clearing = %d, %v; want the handles' 4", c, err)
	}
	must(t, holder.Release(o, 1), "release holder")
	must(t, w1.Release(ctx, 1), "release w1")
	must(t, w2.Release(ctx, 2), "release w2")
	assertNoKeys(t, ctx, s.newBackend(t), p, semKey(p), semFreeTTL)
}

// Two handles disagreeing on the capacity: the second one's acquisitions
// fail with ErrCapacityMismatch while the state lives, until a capacity is
// set at runtime.
func (s *suite) testSemMismatch(t *testing.T, ctx context.Context) {
	p := prefix()
	three := semOpen(s.newBackend(t), p, 3)
	five := semOpen(s.newBackend(t), p, 5)
	must(t, three.Acquire(ctx, 1), "acquire through capacity 3")
	if err := five.Acquire(ctx, 1); !errors.Is(err, semaphore.ErrCapacityMismatch) {
		t.Errorf("Acquire through capacity 5 on a semaphore of 3 = %v, want ErrCapacityMismatch", err)
	}
	if _, err := five.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrCapacityMismatch) {
		t.Errorf("TryAcquire through capacity 5 on a semaphore of 3 = %v, want ErrCapacityMismatch", err)
	}
	must(t, five.SetCapacity(ctx, 4), "set 4")
	must(t, five.Acquire(ctx, 2), "acquire through capacity 5 once set")
	must(t, three.Acquire(ctx, 1), "acquire through capacity 3 once set")
	if ok, err := three.TryAcquire(ctx, 1); ok || err != nil {
		t.Errorf("a fifth permit of 4 = %v, %v", ok, err)
	}
	must(t, five.SetCapacity(ctx, 0), "clear")
	must(t, three.Release(ctx, 2), "release")
	must(t, five.Release(ctx, 2), "release")
	assertNoKeys(t, ctx, s.newBackend(t), p, semKey(p), semFreeTTL)
}

// Bad input is reported before I/O; a request above the capacity in force
// on the server fails with ErrInvalidPermits.
func (s *suite) testSemBadInput(t *testing.T, ctx context.Context) {
	p := prefix()
	sp := newSpy(s.newBackend(t))
	sem := semOpen(sp, p, 3)
	for _, n := range []int64{0, -1, 4} {
		if err := sem.Acquire(ctx, n); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("Acquire(%d) = %v, want ErrInvalidPermits", n, err)
		}
		if err := sem.Release(ctx, n); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("Release(%d) = %v, want ErrInvalidPermits", n, err)
		}
	}
	if err := semOpen(sp, p, 0).Acquire(ctx, 1); !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("Acquire on capacity 0 = %v, want ErrInvalidPermits", err)
	}
	if n := sp.count(); n != 0 {
		t.Errorf("%d calls on bad input", n)
	}
	must(t, sem.SetCapacity(ctx, 2), "set 2")
	if err := sem.Acquire(ctx, 3); !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("Acquire(3) with capacity 2 set = %v, want ErrInvalidPermits", err)
	}
	must(t, sem.SetCapacity(ctx, 0), "clear")
	assertNoKeys(t, ctx, sp, p, semKey(p), semFreeTTL)
}

// semKey returns the main key of the semaphore the cases use under p.
func semKey(p string) string {
	key, err := keys.Base(p, "semaphore", "sem")
	if err != nil {
		panic(err)
	}
	return key
}

// permitUnits are a semaphore's permits, per units of n: Release. The
// holder's unit is one permit; the rival's, all of them.
type permitUnits struct {
	*semaphore.Semaphore
	n int64
}

// releaseCapacity is the capacity of the semaphore of the release cases:
// the most units a case holds at once.
const releaseCapacity = 3

func (p permitUnits) lock(ctx context.Context) error            { return p.Acquire(ctx, p.n) }
func (p permitUnits) tryLock(ctx context.Context) (bool, error) { return p.TryAcquire(ctx, p.n) }
func (p permitUnits) done(ctx context.Context) <-chan struct{}  { return p.Done(ctx) }
func (p permitUnits) unlock(ctx context.Context, n int) error {
	return p.Release(ctx, int64(n)*p.n)
}

func (p permitUnits) count(ctx context.Context) (int, error) {
	st, err := p.State(ctx)
	return int(st.Permits / p.n), err
}

func openPermits(b backend.Backend, name string, c lockConfig, n int64) permitUnits {
	var opts []semaphore.Option
	if c.prefix != "" {
		opts = append(opts, semaphore.WithPrefix(c.prefix))
	}
	if c.watchdog != 0 {
		opts = append(opts, semaphore.WithWatchdog(c.watchdog))
	}
	if c.fixed != 0 {
		opts = append(opts, semaphore.WithLease(c.fixed))
	}
	return permitUnits{semaphore.New(b, name, releaseCapacity, opts...), n}
}

var semReleases = releaseKind{
	call: "semaphore Release", holds: 1, spread: 2,
	open: func(b backend.Backend, name string, c lockConfig) releasable {
		return openPermits(b, name, c, 1)
	},
	rival: func(b backend.Backend, name string, c lockConfig) releasable {
		return openPermits(b, name, c, releaseCapacity)
	},
}
