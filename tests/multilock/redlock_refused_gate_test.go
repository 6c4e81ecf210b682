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

// A contended RedLock queues for its gate in one call while the gate's
// server answered the last attempt on it. If that server has gone away
// since and refuses connections, the wait must end at its first failed
// attempt, as a try would have, not ride the outage out for the wait's
// bound (1s): the other members are a majority without the gate. Over a
// (the gate, on a server of its own), b and c (on the shared server).
func TestRedLockGateRefusingConnectionsCostsNoWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	shared := testserver.Real(t)
	gateSrv, err := testserver.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer gateSrv.Stop()
	if !gateSrv.Restartable() {
		t.Skip("the gate's server is not one the test can stop ($DSYNC_REDIS_ADDR)")
	}
	base := "redlock-refused-gate-" + dsync.NewID()[:8]
	handle := func(i int) *mutex.Mutex {
		addr := shared.Addr()
		if i == 0 {
			addr = gateSrv.Addr()
		}
		return mutex.New(tcpBackend(t, addr), base+string(rune('a'+i)), mutex.WithHandoffAfter(0))
	}
	l := multilock.RedLock(handle(0), handle(1), handle(2))

	// Contention: y holds a and b, and a try of the group fails.
	y := dsync.WithOwner(ctx)
	ya, yb := handle(0), handle(1)
	for _, m := range []*mutex.Mutex{ya, yb} {
		if err := m.LockContext(y); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := l.TryLockContext(dsync.WithOwner(ctx)); ok || err != nil {
		t.Fatalf("TryLockContext with 2 of 3 held elsewhere = %v, %v; want false", ok, err)
	}
	if err := yb.UnlockContext(y); err != nil {
		t.Fatal(err)
	}

	// The next acquisition waits for a, whose server answers.
	n1 := dsync.WithOwner(ctx)
	done := make(chan error, 1)
	go func() { done <- l.LockContext(n1) }()
	probe := handle(0)
	for i := 0; ; i++ {
		st, err := probe.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters > 0 {
			break
		}
		if i == 5000 {
			t.Fatal("no waiter queued for a within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := ya.UnlockContext(y); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("LockContext behind y: %v", err)
	}
	if err := l.UnlockContext(n1); err != nil {
		t.Fatal(err)
	}

	// a's server goes away: connections to it are refused.
	gateSrv.Stop()
	for i := range 2 {
		n := dsync.WithOwner(ctx)
		start := time.Now()
		if err := l.LockContext(n); err != nil {
			t.Fatalf("acquisition %d with a's server gone: %v", i+1, err)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("acquisition %d with a's server refusing connections took %v; want it to give a up at once (< 500ms)", i+1, took)
		}
		if err := l.UnlockContext(n); err != nil {
			t.Fatal(err)
		}
	}
}
