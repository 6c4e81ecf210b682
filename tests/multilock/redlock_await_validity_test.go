package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// A RedLock round that holds its gate and waits for more members stops
// waiting when its validity runs out: a majority it got after that could
// not win, so a wait past it only keeps the gate from others. Over 5
// members a..e with a 400ms lease, b..e held elsewhere throughout, the
// RedLock queues for a and is handed it; its hold of a (one token) must
// not outlast the lease by much, where a wait for b bounded only by 1s
// kept it held for a second.
func TestRedLockAwaitStopsWhenTheValidityRunsOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const lease = 400 * time.Millisecond
	m := newMembers(t, ctx, "redlock-validity", mutex.WithWatchdog(lease))
	lock := m.hold
	for i := 1; i < 5; i++ {
		defer lock(i)()
	}
	freeA := lock(0)

	l := multilock.NewRedLock(m.handles(5), multilock.WithLease(lease))
	w, wcancel := context.WithCancel(dsync.WithOwner(ctx))
	wid, _ := dsync.OwnerFrom(w)
	done := make(chan error, 1)
	go func() { done <- l.LockContext(w) }()
	defer func() {
		wcancel()
		if err := <-done; err == nil {
			t.Error("LockContext won with 4 of 5 members held elsewhere")
			l.UnlockContext(w)
		}
	}()

	m.awaitWaiters(0, 1)
	probe := m.handle(0)
	freeA() // handed to the RedLock

	// Watch a for 1.5s: the longest the RedLock holds it with one token.
	var (
		token       int64
		first, last time.Time
		longest     time.Duration
	)
	end := time.Now().Add(1500 * time.Millisecond)
	for k := 0; time.Now().Before(end) && k < 5000; k++ {
		st, err := probe.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if st.Holder == wid {
			if st.Token != token {
				token, first = st.Token, now
			}
			last = now
			longest = max(longest, last.Sub(first))
		}
		time.Sleep(2 * time.Millisecond)
	}
	if token == 0 {
		t.Fatal("the RedLock never held a")
	}
	if longest > lease+200*time.Millisecond {
		t.Errorf("the RedLock held a for %v in a round that could not win within its %v validity", longest, lease)
	}
}
