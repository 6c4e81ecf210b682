package lease

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The index of leases of a session, and the pending hand-offs it holds.

// TestIndexPerSession: each scheduler indexes its own leases: holds of one
// key, owner and role kept through several backend values are each found
// through their own, by key, owner, role and id.
func TestIndexPerSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		b1, b2, none := h.fake(), h.fake(), h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		spec := func(id string) Spec {
			s := watchdog("index:k", ttl)
			s.ID = id
			return s
		}
		l1 := h.start(b1, spec("id1"), t0)
		l2 := h.start(b2, spec("id2"), t0)
		other := spec("id3")
		other.Owner = "someone"
		l3 := h.start(b1, other, t0)

		if Get(b1, "index:k", "owner", "x") != l1 || Get(b2, "index:k", "owner", "x") != l2 {
			t.Errorf("Get does not return the backend's own lease")
		}
		if Get(b1, "index:k", "someone", "x") != l3 || Get(b1, "index:k", "owner", "r") != nil {
			t.Errorf("Get confuses owners or roles")
		}
		if got := Get(none, "index:k", "owner", "x"); got != nil {
			t.Errorf("Get(none) = %s, want nil", got.ID())
		}
		if ByID(b1, "index:k", "owner", "x", "id1") != l1 || ByID(b1, "index:k", "owner", "x", "id2") != nil ||
			ByID(b1, "index:k", "owner", "x", "") != nil || ByID(b1, "index:k", "owner", "r", "id1") != nil {
			t.Errorf("ByID finds a lease it should not, or misses one")
		}
		if got := sched(b1).Other("index:k", "owner", "x"); got != l3 {
			t.Errorf("Other = %v, want the other owner's lease", got)
		}
		if !sched(b1).Holds("index:k", "owner", "x") || sched(none).Holds("index:k", "owner", "x") {
			t.Errorf("Holds is wrong")
		}

		// Ending one leaves the others.
		l2.Release()
		if Get(b2, "index:k", "owner", "x") != nil {
			t.Errorf("the released lease is still found")
		}
		sleepUntil(t0.Add(ttl/3 + 10*time.Millisecond))
		if b1.numCalls() != 1 {
			t.Errorf("backend renewed %d times, want 1", b1.numCalls())
		}
		if b2.numCalls() != 0 {
			t.Errorf("released lease renewed")
		}
		l1.Release()
		l3.Release()
	})
}

// TestStartReplacesSameBackend: a Start of the same key, owner and role on
// the same backend ends the earlier lease as released, not lost.
func TestStartReplacesSameBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		b1, b2 := h.fake(), h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		s := watchdog("replace:k", ttl)
		s.ID = "old"
		old := h.start(b1, s, t0)
		s.ID = "elsewhere"
		elsewhere := h.start(b2, s, t0)
		time.Sleep(100 * time.Millisecond)
		s.ID = "new"
		t1 := time.Now()
		nu := h.start(b1, s, t1)

		assertEnded(t, b1, old, false)
		assertActive(t, b1, nu)
		assertActive(t, b2, elsewhere)
		if got := Find(b1, "replace:k", "owner", "x"); len(got) != 1 || got[0] != nu {
			t.Errorf("Find(b1) = %d leases, want the new one", len(got))
		}
		if got := Find(b2, "replace:k", "owner", "x"); len(got) != 1 || got[0] != elsewhere {
			t.Errorf("Find(b2) = %d leases, want the one kept there", len(got))
		}
		if leases, _ := Stats(b1); leases != 1 {
			t.Errorf("Stats(b1) leases = %d, want 1", leases)
		}
		old.Release() // harmless
		if leases, _ := Stats(b1); leases != 1 {
			t.Errorf("Stats(b1) leases = %d after releasing the replaced lease, want 1", leases)
		}
		// Only the new lease is renewed on b1, once, at t1+TTL/3 or up to
		// TTL/6 earlier (riding along in the round the old lease armed).
		sleepUntil(t1.Add(ttl/3 + time.Millisecond))
		calls := b1.callLog()
		if len(calls) != 1 || len(calls[0].holds) != 1 {
			t.Fatalf("b1 calls %+v, want one renewing one lease", calls)
		}
		if at := calls[0].at; at.After(t1.Add(ttl/3)) || at.Before(t1.Add(ttl/3-ttl/6)) {
			t.Errorf("b1 renewal at t1+%v, want in [t1+%v, t1+%v]", at.Sub(t1), ttl/3-ttl/6, ttl/3)
		}
		if got := nu.Deadline(); !got.Equal(calls[0].at.Add(ttl)) {
			t.Errorf("new lease's deadline = renewal+%v, want +%v", got.Sub(calls[0].at), ttl)
		}
		if old.Lost() {
			t.Errorf("replaced lease is lost")
		}
	})
}

// TestTakenBeforeStartStartsLost: a hold that LoseHold took before any
// lease kept it (a hand-off ForceUnlock took before its waiter accepted
// it) starts lost when the waiter starts keeping it; the hold's id is
// forgotten once used, and after takenMemory.
func TestTakenBeforeStartStartsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		sched(f).LoseHold("taken:1", "taken:1#1", "taken by ForceUnlock", true)
		l := h.start(f, watchdog("taken:1", ttl), time.Now())
		assertEnded(t, f, l, true)

		// Once used, the id is forgotten: the same id kept again is not lost.
		again := h.start(f, watchdog("taken:1", ttl), time.Now())
		assertActive(t, f, again)

		sched(f).LoseHold("taken:2", "taken:2#1", "taken by ForceUnlock", true)
		time.Sleep(takenMemory + time.Second)
		late := h.start(f, watchdog("taken:2", ttl), time.Now())
		assertActive(t, f, late)
	})
}

// TestPendingHoldIsQueuedBehindThenKept: a hold handed to a waiter of the
// session is pending: another owner's waiter queues behind it (Other,
// Enqueue); the waiter's Keep turns that very record into its lease, with
// the queued entry, which the lease's release takes.
func TestPendingHoldIsQueuedBehindThenKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		s := sched(f)
		s.Pending("pend:1", "owner", "x", "pend:1#1", "wake", 1, 2*time.Second)
		if s.Find("pend:1", "owner", "x") != nil || s.Holds("pend:1", "owner", "x") {
			t.Fatal("a pending hold is found as the owner's hold before it keeps it")
		}
		p := s.Other("pend:1", "someone", "x")
		if p == nil {
			t.Fatal("no pending hold to queue behind")
		}
		token, ok := p.Enqueue("hub/w|2000|someone")
		if !ok {
			t.Fatal("Enqueue refused on a pending hold")
		}
		if token != 1 {
			t.Errorf("Enqueue behind the pending hold returned token %d, want the grant's, 1", token)
		}
		l := h.start(f, watchdog("pend:1", 3*time.Second), time.Now())
		if l != p {
			t.Fatalf("Keep made a new lease, want the pending record taken over")
		}
		assertActive(t, f, l)
		if leases, _ := s.Stats(); leases != 1 {
			t.Errorf("Stats leases = %d, want 1", leases)
		}
		if b, ok := l.BeginRelease(Begin{TakeQueued: true}); !ok || !b.Took || len(b.Queued) != 1 || b.Queued[0] != "hub/w|2000|someone" {
			t.Errorf("BeginRelease took %v (%v, %v); want the entry queued while pending", b.Queued, b.Took, ok)
		}
	})
}

// TestPendingHoldDroppedOrExpired: a pending hold that its waiter gave up
// (DropPending) or that outlived its ttl is no longer queued behind, and
// the waiters queued behind it are woken; ForceUnlock of a pending hold
// makes its lease start lost.
func TestPendingHoldDroppedOrExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		var woken []string
		var mu sync.Mutex
		s := NewScheduler(f, Hooks{Wake: func(channel string, entries []string) {
			mu.Lock()
			woken = append(woken, entries...)
			mu.Unlock()
		}})
		s.Pending("drop:1", "owner", "x", "drop:1#1", "wake", 1, 2*time.Second)
		s.Other("drop:1", "someone", "x").Enqueue("e1")
		s.DropPending("drop:1", "drop:1#1")
		if s.Other("drop:1", "someone", "x") != nil {
			t.Error("a dropped pending hold is still queued behind")
		}
		s.Pending("drop:2", "owner", "x", "drop:2#1", "wake", 1, 2*time.Second)
		s.Other("drop:2", "someone", "x").Enqueue("e2")
		time.Sleep(2 * time.Second)
		if s.Other("drop:2", "someone", "x") != nil {
			t.Error("a pending hold past its ttl is still queued behind")
		}
		mu.Lock()
		if len(woken) != 2 || woken[0] != "e1" || woken[1] != "e2" {
			t.Errorf("woken %v, want e1 then e2", woken)
		}
		mu.Unlock()
		s.Pending("force:1", "owner", "x", "force:1#1", "wake", 1, 2*time.Second)
		s.LoseHold("force:1", "force:1#1", "taken by ForceUnlock", true)
		l := s.Keep(watchdog("force:1", 3*time.Second), time.Now(), 0, 1)
		if !l.Lost() {
			t.Error("a hold ForceUnlock took while pending started active")
		}
		s.Retire()
	})
}
