package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
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
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := "redlock-gate-" + dsync.NewID()[:8]
	handle := func(i int) *mutex.Mutex {
		// Strict hand-off: a release hands a member to its waiter, which
		// a newcomer's attempt could otherwise take first (see mutex).
		return mutex.New(tcpBackend(t, srv.Addr()), base+string(rune('a'+i)), mutex.WithHandoffAfter(0))
	}
	h, n := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	ha, nb, nc := handle(0), handle(1), handle(2)
	for _, x := range []struct {
		m     *mutex.Mutex
		owner context.Context
	}{{ha, h}, {nb, n}, {nc, n}} {
		if err := x.m.LockContext(x.owner); err != nil {
			t.Fatal(err)
		}
	}
	var members []dsync.Locker
	for i := range 3 {
		members = append(members, handle(i))
	}
	l := multilock.RedLock(members...)
	w := dsync.WithOwner(ctx)
	done := make(chan error, 1)
	go func() { done <- l.LockContext(w) }()

	// W's first round finds every member busy and queues for a, the
	// first in order.
	probe := handle(0)
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		if st, err := probe.State(ctx); err != nil {
			t.Fatal(err)
		} else if st.Waiters > 0 {
			break
		}
		if time.Now().After(deadline) || i > 5000 {
			t.Fatal("the RedLock did not queue for member a within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := ha.UnlockContext(h); err != nil {
		t.Fatal(err)
	}
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
	for _, m := range []*mutex.Mutex{nb, nc} {
		if err := m.UnlockContext(n); err != nil {
			t.Fatal(err)
		}
	}
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
