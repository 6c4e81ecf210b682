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

// Two RedLock waiters never wait for each other's members: a waiter
// holding its gate lets go of the members after the one it waits for,
// as All does. Over 5 members m0..m4 (canonical order), with Y holding
// m1 and Z holding m2 and m4: W2 queues for m1; X takes m0; W1 queues
// for m0, is handed it, takes m3, and waits for m1. Z frees m2, and Y's
// unlock hands m1 to W2, which finds m2 free and m3 too (W1 let it go):
// three of five, at once. Had W1 kept m3, W2 would wait for it while W1
// waits for m1, until one wait ran out (a second).
func TestRedLockWaitersDoNotWaitForEachOther(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := "redlock-order-" + dsync.NewID()[:8]
	handle := func(i int) *mutex.Mutex {
		// Strict hand-off: each release hands the member to its waiter.
		return mutex.New(tcpBackend(t, srv.Addr()), base+string(rune('0'+i)), mutex.WithHandoffAfter(0))
	}
	group := func() *multilock.Lock {
		var ms []dsync.Locker
		for i := range 5 {
			ms = append(ms, handle(i))
		}
		return multilock.RedLock(ms...)
	}
	probes := make([]*mutex.Mutex, 5)
	for i := range probes {
		probes[i] = handle(i)
	}
	awaitWaiters := func(i, n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for k := 0; ; k++ {
			st, err := probes[i].State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Waiters >= n {
				return
			}
			if time.Now().After(deadline) || k > 5000 {
				t.Fatalf("member %d: %d waiters within 5s; want %d", i, st.Waiters, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	lock := func(m *mutex.Mutex, owner context.Context) {
		t.Helper()
		if err := m.LockContext(owner); err != nil {
			t.Fatal(err)
		}
	}
	x, y, z := dsync.WithOwner(ctx), dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	ym1, zm2, zm4, xm0 := handle(1), handle(2), handle(4), handle(0)
	lock(ym1, y)
	lock(zm2, z)
	lock(zm4, z)

	type outcome struct {
		err error
		at  time.Time
	}
	w1, w2 := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	l1, l2 := group(), group()
	done1, done2 := make(chan outcome, 1), make(chan outcome, 1)
	go func() { err := l2.LockContext(w2); done2 <- outcome{err, time.Now()} }()
	awaitWaiters(1, 1) // W2 queued for m1
	lock(xm0, x)
	go func() { err := l1.LockContext(w1); done1 <- outcome{err, time.Now()} }()
	awaitWaiters(0, 1) // W1 queued for m0
	if err := xm0.UnlockContext(x); err != nil {
		t.Fatal(err)
	}
	awaitWaiters(1, 2) // W1, handed m0, waits for m1 behind W2
	if err := zm2.UnlockContext(z); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	if err := ym1.UnlockContext(y); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done2:
		if o.err != nil {
			t.Fatalf("W2: %v", o.err)
		}
		if took := o.at.Sub(freed); took > 500*time.Millisecond {
			t.Errorf("W2 won %v after m1 was handed to it; want at once (m2 and m3 free)", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("W2 did not win within 5s")
	}
	if err := l2.UnlockContext(w2); err != nil {
		t.Fatal(err)
	}
	if err := zm4.UnlockContext(z); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done1:
		if o.err != nil {
			t.Fatalf("W1: %v", o.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("W1 did not win within 5s of everything else being freed")
	}
	if err := l1.UnlockContext(w1); err != nil {
		t.Fatal(err)
	}
}
