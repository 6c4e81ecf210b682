package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
)

// A RedLock round that holds its gate and times out waiting for a member
// after it (stuck held: its holder gone, its lease not run out) goes on
// with the others, rather than let the gate go and start a round that
// waits for the stuck member again; and its wait is short (a few round
// trips, at least 100ms, not the 1s of a wait holding nothing), since a
// stuck member would otherwise cost every contender that wait in turn,
// each holding the gate. Over 3 members a, b, c: b is held throughout, c
// briefly by another owner, and the RedLock is handed a while it queues;
// it waits for b (100ms on loopback), then must win with a and c, not
// wait for b again later.
func TestRedLockAwaitGoesOnPastAStuckMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := newMembers(t, ctx, "redlock-stuck")
	lock, waiters := m.hold, func(i int) { m.awaitWaiters(i, 1) }
	defer lock(1)() // stuck
	freeA, freeC := lock(0), lock(2)

	l := m.redlock(3)
	w := dsync.WithOwner(ctx)
	done := make(chan error, 1)
	go func() { done <- l.LockContext(w) }()
	waiters(0)
	freeA() // handed to the RedLock, which finds b and c busy and waits for b
	handed := time.Now()
	waiters(1)
	freeC()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LockContext did not return within 5s")
	}
	if d := time.Since(handed); d > 600*time.Millisecond {
		t.Errorf("the RedLock won %v after it was handed a, with c free after 1 wait for b; want one short wait (100ms here)", d)
	}
	if err := l.UnlockContext(w); err != nil {
		t.Fatal(err)
	}
}
