package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
)

// Two RedLocks over the same members, each holding its gate and part of
// the others, must not wait for each other's members: a round that waits
// for a member while holding one that comes after it in canonical order
// closes a cycle with a round that holds the first and waits for the
// second, and both stall until a wait times out (1s).
//
// Over 5 members a..e (canonical order), e held throughout by another
// owner: B queues for b (a was free in its round); A queues for a, is
// handed it, takes d in its next try (c held elsewhere) and waits for b.
// c is freed, then b is handed to B, which takes c but finds a and d held
// by A. B holds b and c, A holds a and d: if A waits for b holding d, B
// waits for d and neither moves until A's wait times out. A must let d
// go first (it comes after b), so that B wins at once with b, c and d.
func TestRedLockAwaitHoldsNoMemberAfterTheOneItWaitsFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := newMembers(t, ctx, "redlock-nocycle")
	freeE := m.hold(4)
	defer freeE()
	freeB := m.hold(1)
	freeC := m.hold(2)

	lb, ob := m.redlock(5), dsync.WithOwner(ctx)
	doneB := make(chan error, 1)
	go func() { doneB <- lb.LockContext(ob) }()
	m.awaitWaiters(1, 1) // B queues for b

	freeA := m.hold(0)
	la, oa := m.redlock(5), dsync.WithOwner(ctx)
	doneA := make(chan error, 1)
	go func() { doneA <- la.LockContext(oa) }()
	m.awaitWaiters(0, 1) // A queues for a

	freeA()              // a is handed to A, which takes d and waits for b
	m.awaitWaiters(1, 2) // behind B
	freeC()
	freeB() // b is handed to B
	handed := time.Now()

	select {
	case err := <-doneB:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-doneA:
		t.Fatalf("A's LockContext returned %v before B's, with B holding b", err)
	case <-time.After(5 * time.Second):
		t.Fatal("B's LockContext did not return within 5s")
	}
	if d := time.Since(handed); d > 500*time.Millisecond {
		t.Errorf("B won %v after it was handed b, with c and d free but for A; want A, waiting for b, not to hold d, which comes after it", d)
	}
	if err := lb.UnlockContext(ob); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-doneA:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A's LockContext did not return within 5s of B's unlock")
	}
	if err := la.UnlockContext(oa); err != nil {
		t.Fatal(err)
	}
}
