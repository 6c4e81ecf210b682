package multilock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
)

// A round that wins without the gate, whose server did not answer, makes
// the next queueing for the gate try it first, as a round that lost does:
// a RedLock that kept believing the gate's server answered would wait the
// gate's full bound (1s) for a server gone since, once it met contention
// again.
func TestRedLockGateUnansweredInWonRoundIsTriedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t)
		_, _, n1 := r.lockBehindY(t) // the gate answered
		if err := r.l.UnlockContext(n1); err != nil {
			t.Fatal(err)
		}
		// Uncontended, queued for the gate at once: the gate is free, and
		// the group goes back to trying all at once.
		n2 := dsync.WithOwner(context.Background())
		if err := r.l.LockContext(n2); err != nil {
			t.Fatal(err)
		}
		if err := r.l.UnlockContext(n2); err != nil {
			t.Fatal(err)
		}

		// The gate's server stalls; a round wins with b and c.
		r.a.stalls = true
		n3 := dsync.WithOwner(context.Background())
		if err := r.l.LockContext(n3); err != nil {
			t.Fatal(err)
		}
		if err := r.l.UnlockContext(n3); err != nil {
			t.Fatal(err)
		}

		// Contention again, seen through a round the gate answered (y
		// holds a, z holds b); then z lets b go, and the gate stalls.
		r.stallHeldGate(t)

		n4 := dsync.WithOwner(context.Background())
		start := time.Now()
		if err := r.l.LockContext(n4); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		tries, locks := r.a.calls()
		// With these members the member timeout and the wait's bound are
		// both 1s: one try costs 1s, a wait and then a try 2s.
		if tries != 1 || locks != 0 || took > time.Second {
			t.Fatalf("with the gate's server silent since its last won round: %d tries and %d waits on the gate, %v; want one try bounded by the member timeout (1s), no wait", tries, locks, took)
		}
		if err := r.l.UnlockContext(n4); err != nil {
			t.Fatal(err)
		}
	})
}
