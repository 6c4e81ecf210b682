package multilock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
)

// A gate whose server stalls while the acquisition queues for it in one
// call costs that acquisition the wait's bound (1s) once: the wait is its
// attempt on the gate, which the first round counts as its own, as it
// counts the gate's try (a server that stalls costs one member timeout,
// not two). A first round that tried the stalled gate again would cost a
// member timeout (1s here) more. Over a (the gate, held by y, its server
// stalling), b and c, with the group contended and the gate answering
// when it last was tried.
func TestRedLockStalledGateQueuedInOneCallCostsOneBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t)
		r.stallAfterAnswer(t)

		n2 := dsync.WithOwner(context.Background())
		start := time.Now()
		if err := r.l.LockContext(n2); err != nil {
			t.Fatalf("LockContext with the gate stalled: %v; want a hold of b and c", err)
		}
		took := time.Since(start)
		tries, locks := r.a.calls()
		if took > 1500*time.Millisecond {
			t.Errorf("LockContext with the gate's server stalled took %v (%d tries, %d waits on the gate); want the wait's bound (1s) once, not a member timeout (1s) more", took, tries, locks)
		}
		if err := r.l.UnlockContext(n2); err != nil {
			t.Fatal(err)
		}
	})
}
