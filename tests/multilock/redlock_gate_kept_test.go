package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
)

// A RedLock waiter handed the member it queued for (its gate) keeps it
// while the others it needs are briefly held elsewhere, as when the last
// holder locks again and takes them in a round that it gives back: the
// waiter waits for them holding the gate, instead of letting the gate go
// and trying again later, which let newcomers through and doubled the
// contended tail. Over 3 members a, b, c (canonical order): owner H
// holds a, owner N holds b and c; the RedLock's LockContext queues for a;
// H's unlock hands a to it; for 60ms, while N still holds b and c (a
// newcomer's round holds them for a round trip; a wait for them is
// bounded by 100ms at least), a must stay held and another owner's
// TryLock of a fail; N's unlock then completes the RedLock.
func TestRedLockWaiterKeepsItsGate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := newMembers(t, ctx, "redlock-gate")
	freeA, freeB, freeC := m.hold(0), m.hold(1), m.hold(2)
	l := m.redlock(3)
	w := dsync.WithOwner(ctx)
	done := make(chan error, 1)
	go func() { done <- l.LockContext(w) }()

	// W's first round finds every member busy and queues for a, the
	// first in order.
	m.awaitWaiters(0, 1)
	freeA()
	probe := m.handle(0)
	other := dsync.WithOwner(ctx)
	const window = 60 * time.Millisecond
	end := time.Now().Add(window)
	for i := 0; time.Now().Before(end) && i < 1000; i++ {
		ok, err := probe.TryLockContext(other)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			probe.UnlockContext(other)
			t.Fatalf("another owner took member a %v after it was handed to the waiting RedLock; want the RedLock to keep it while it waits for b and c",
				window-time.Until(end))
		}
		select {
		case err := <-done:
			t.Fatalf("LockContext returned %v while b and c were held elsewhere", err)
		case <-time.After(time.Millisecond):
		}
	}
	freeB()
	freeC()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("LockContext after b and c were freed: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("LockContext did not return within 2s of b and c being freed")
	}
	if err := l.UnlockContext(w); err != nil {
		t.Fatal(err)
	}
}
