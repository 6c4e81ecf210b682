package fairlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// fairlock's doc (Keys): once the lock key is deleted behind dsync's back
// while a waiter is queued, newcomers may take the lock ahead of it only
// until the waiter's next heartbeat writes the key back. Newcomers lock
// and unlock in a loop from the deletion on; the waiter, which beats every
// 300ms, must hold the lock within its heartbeat and a margin, and then a
// newcomer's TryLock must fail.
func TestNewcomersTakeTheLockOnlyUntilAHeartbeatAfterKeyDeleted(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "deleted-key-" + dsync.NewID()[:12]
	key := "dsync:fairlock:{" + name + "}"
	holder := fairlock.New(b, name, fairlock.WithLogger(nil))
	ho := dsync.WithOwner(ctx)
	if err := holder.LockContext(ho); err != nil {
		t.Fatal(err)
	}
	defer holder.UnlockContext(ho)
	const beat = 300 * time.Millisecond // a third of the waiter timeout
	w := fairlock.New(b, name, fairlock.WithWaiterTimeout(3*beat), fairlock.WithLogger(nil))
	wo := dsync.WithOwner(ctx)
	held := make(chan error, 1)
	go func() { held <- w.LockContext(wo) }()
	for i := 0; ; i++ {
		st, err := holder.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued == 1 {
			break
		}
		if i == 1000 {
			t.Fatalf("the waiter never queued: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Behind dsync's back.
	if n, err := srv.Do(ctx, "DEL", key); err != nil || n != int64(1) {
		t.Fatalf("DEL %s = %v, %v", key, n, err)
	}
	deleted := time.Now()
	newcomer := fairlock.New(b, name, fairlock.WithLogger(nil))
	took := 0
	for i := 0; ; i++ {
		select {
		case err := <-held:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the waiter held %v after the deletion; newcomers took the lock %d times before it", time.Since(deleted).Round(time.Millisecond), took)
			if ok, err := newcomer.TryLockContext(ctx); err != nil || ok {
				t.Errorf("a newcomer's TryLock while the waiter holds = %v, %v; want false", ok, err)
			}
			if err := w.UnlockContext(wo); err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		// A loaded machine may hold the waiter's beat up: a bound of
		// several beats still fails a waiter that waits for newcomers to
		// stop.
		if time.Since(deleted) > 10*beat || i > 100000 {
			st, _ := holder.State(ctx)
			t.Fatalf("the queued waiter did not take the lock within %v of the deletion while newcomers took it %d times (State: %+v)", 10*beat, took, st)
		}
		ok, err := newcomer.TryLockContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			took++
			if err := newcomer.UnlockContext(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
