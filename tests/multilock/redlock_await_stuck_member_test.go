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
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := "redlock-stuck-" + dsync.NewID()[:8]
	handle := func(i int) *mutex.Mutex {
		return mutex.New(tcpBackend(t, srv.Addr()), base+string(rune('a'+i)), mutex.WithHandoffAfter(0))
	}
	lock := func(i int) func() {
		t.Helper()
		m, o := handle(i), dsync.WithOwner(ctx)
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := m.UnlockContext(o); err != nil {
				t.Error(err)
			}
		}
	}
	waiters := func(i int) {
		t.Helper()
		probe := handle(i)
		deadline := time.Now().Add(5 * time.Second)
		for k := 0; ; k++ {
			st, err := probe.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Waiters > 0 {
				return
			}
			if time.Now().After(deadline) || k > 5000 {
				t.Fatalf("member %c has no waiter after 5s", 'a'+i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	defer lock(1)() // stuck
	freeA, freeC := lock(0), lock(2)

	var ms []dsync.Locker
	for i := range 3 {
		ms = append(ms, handle(i))
	}
	l := multilock.RedLock(ms...)
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
