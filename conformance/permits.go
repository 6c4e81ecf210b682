package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/semaphore"
)

// permitTests are the cases of the semaphore's portable permits, released
// and extended by id.
func (s *suite) permitRules() []rule {
	return []rule{
		{"PermitReleasedByID", "a portable permit is released by its id through another backend value; a retried release counts once, and a second release is ErrNotHeld and changes nothing", false, s.testPermitByID},
		{"PermitSharesCapacity", "portable permits and owners' permits share the capacity; a freed permit is handed to a waiting AcquirePermit through pub/sub, with a whole lease", false, s.testPermitCapacity},
		{"PermitLease", "a portable permit lapses at the end of its lease by itself, unless ExtendPermit extended it", false, s.testPermitLease},
	}
}

// A permit taken through one backend is given back by id through another;
// the release's reply is lost and retried, and counts once; a second
// release is ErrNotHeld. No key is left.
func (s *suite) testPermitByID(t *testing.T, ctx context.Context) {
	p := prefix()
	admit := semOpen(s.newBackend(t), p, 3)
	sp := newSpy(s.newBackend(t))
	finish := semOpen(sp, p, 3)
	a, err := admit.AcquirePermit(ctx)
	must(t, err, "acquire a permit")
	b, err := admit.AcquirePermit(dsync.WithOwner(ctx))
	must(t, err, "acquire a permit")
	if a.ID == b.ID || len(a.ID) != 32 {
		t.Fatalf("permit ids %q and %q", a.ID, b.ID)
	}
	sp.loseReplies(1)
	must(t, finish.ReleasePermit(ctx, a.ID), "release by id, its reply lost")
	if err := finish.ReleasePermit(ctx, a.ID); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("a second release of the id = %v, want ErrNotHeld", err)
	}
	st, err := finish.State(ctx)
	must(t, err, "state")
	if st.Held != 1 || st.Holders != 1 {
		t.Errorf("state %+v, want the other permit held alone", st)
	}
	must(t, finish.ReleasePermit(ctx, b.ID), "release by id")
	assertNoKeys(t, ctx, sp, p, semKey(p), semFreeTTL)
}

// Capacity 2: an owner holds 1, a permit takes the other; a second
// AcquirePermit, on another backend as a process of its own, waits until
// the owner gives its permit back, and is handed it with its whole lease.
func (s *suite) testPermitCapacity(t *testing.T, ctx context.Context) {
	p := prefix()
	const lease = 2 * time.Second
	sem := semOpen(s.newBackend(t), p, 2, semaphore.WithLease(lease))
	o := dsync.WithOwner(ctx)
	must(t, sem.Acquire(o, 1), "acquire")
	first, err := sem.AcquirePermit(ctx)
	must(t, err, "acquire a permit")
	got := make(chan semaphore.Permit, 1)
	waiter := semOpen(elsewhere{s.newBackend(t)}, p, 2, semaphore.WithLease(lease))
	asked := time.Now()
	go func() {
		pm, err := waiter.AcquirePermit(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- pm
	}()
	semAwait(t, ctx, sem, "the second permit queued", semQueued(1))
	if ok, err := sem.TryAcquire(dsync.WithOwner(ctx), 1); ok || err != nil {
		t.Fatalf("TryAcquire with 2 of 2 held = %v, %v", ok, err)
	}
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	released := time.Now()
	must(t, sem.Release(o, 1), "release")
	second := within(t, s.bound(time.Second), got, "the permit handed to the waiter")
	handed := time.Now()
	if d, slow := time.Since(released), trips.Stop(); d > s.bound(50*time.Millisecond)+loadAllowance(slow, trips) {
		t.Errorf("the freed permit reached the waiter %v after the release, want within %v, and %v more for the longest round trip timed meanwhile, three times (or the meter's stalls, %v, if more, up to %v)", d, s.bound(50*time.Millisecond), slow, trips.Stalled(), stallAllowance)
	}
	// Its lease counts from when the waiter's call was sent, at the
	// earliest when it was made: a whole lease from then, whenever the
	// hand-off came (and not, say, what the releaser's lease had left).
	if short := asked.Add(lease).Sub(second.Expires); short > 0 {
		t.Errorf("a permit handed to a waiter expires %v before a whole %v lease from the waiter's call", short, lease)
	}
	if long := second.Expires.Sub(handed.Add(lease)); long > 0 {
		t.Errorf("a permit handed to a waiter expires %v after a whole %v lease from its hand-off: it promises more than the server gives", long, lease)
	}
	must(t, sem.ReleasePermit(ctx, first.ID), "release")
	must(t, sem.ReleasePermit(ctx, second.ID), "release")
}

// On a 300ms lease one permit lapses by itself and its release is then
// ErrNotHeld; another, on a 1s lease extended at once, outlives its first
// lease.
func (s *suite) testPermitLease(t *testing.T, ctx context.Context) {
	p := prefix()
	const lease, keptLease = 300 * time.Millisecond, time.Second
	sem := semOpen(s.newBackend(t), p, 2, semaphore.WithLease(lease))
	extender := semOpen(s.newBackend(t), p, 2)
	_, err := extender.State(ctx) // connected before the clock starts
	must(t, err, "state")
	lapsed, err := sem.AcquirePermit(ctx)
	must(t, err, "acquire a permit")
	kept, err := semOpen(s.newBackend(t), p, 2, semaphore.WithLease(keptLease)).AcquirePermit(ctx)
	must(t, err, "acquire a permit")
	must(t, extender.ExtendPermit(ctx, kept.ID, 10*keptLease), "extend")
	// Past both first leases: time is what is tested.
	time.Sleep(time.Until(kept.Expires) + 50*time.Millisecond)
	if err := sem.ReleasePermit(ctx, lapsed.ID); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("release of a lapsed permit = %v, want ErrNotHeld", err)
	}
	if err := sem.ExtendPermit(ctx, lapsed.ID, lease); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("extension of a lapsed permit = %v, want ErrNotHeld", err)
	}
	st, err := sem.State(ctx)
	must(t, err, "state")
	if st.Held != 1 {
		t.Errorf("state %+v past the first lease, want the extended permit held", st)
	}
	must(t, sem.ReleasePermit(ctx, kept.ID), "release of the extended permit")
}
