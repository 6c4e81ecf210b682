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
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := "redlock-nocycle-" + dsync.NewID()[:8]
	handle := func(i int) *mutex.Mutex {
		// Strict hand-off: releases serve the waiters in turn. A backend
		// of its own: waiters queue on the server, not behind a hold of
		// their session (see mutex).
		return mutex.New(tcpBackend(t, srv.Addr()), base+string(rune('a'+i)), mutex.WithHandoffAfter(0))
	}
	redlock := func() *multilock.Lock {
		var ms []dsync.Locker
		for i := range 5 {
			ms = append(ms, handle(i))
		}
		return multilock.RedLock(ms...)
	}
	waiters := func(i, n int) {
		t.Helper()
		probe := handle(i)
		deadline := time.Now().Add(5 * time.Second)
		for k := 0; ; k++ {
			st, err := probe.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Waiters >= n {
				return
			}
			if time.Now().After(deadline) || k > 5000 {
				t.Fatalf("member %c has %d waiters after 5s, want %d", 'a'+i, st.Waiters, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	lock := func(i int) (func(), *mutex.Mutex) {
		t.Helper()
		m, o := handle(i), dsync.WithOwner(ctx)
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := m.UnlockContext(o); err != nil {
				t.Error(err)
			}
		}, m
	}

	freeE, _ := lock(4)
	defer freeE()
	freeB, _ := lock(1)
	freeC, _ := lock(2)

	lb, ob := redlock(), dsync.WithOwner(ctx)
	doneB := make(chan error, 1)
	go func() { doneB <- lb.LockContext(ob) }()
	waiters(1, 1) // B queues for b

	freeA, _ := lock(0)
	la, oa := redlock(), dsync.WithOwner(ctx)
	doneA := make(chan error, 1)
	go func() { doneA <- la.LockContext(oa) }()
	waiters(0, 1) // A queues for a

	freeA()       // a is handed to A, which takes d and waits for b
	waiters(1, 2) // behind B
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
