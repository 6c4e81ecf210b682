package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/semaphore"
)

// TestForceUnlockSemaphoreKeepsTurnAndCapacity: force-unlock ends every
// permit but keeps the state that a lone holder's plain acquisition (one
// SET NX of the state key) must find while a waiter is queued or a
// capacity is set at runtime: a newcomer through a handle of capacity 4
// neither goes above the capacity of 1 set at runtime nor passes the
// waiter, who gets the permit.
func TestForceUnlockSemaphoreKeepsTurnAndCapacity(t *testing.T) {
	m := startMini(t)
	ctx := context.Background()
	open := func(opts ...semaphore.Option) *semaphore.Semaphore {
		return semaphore.New(newBackend(t, m.Addr()), "kept", 4, append(opts, semaphore.WithLogger(nil))...)
	}
	admin := open()
	if err := admin.SetCapacity(ctx, 1); err != nil {
		t.Fatal(err)
	}
	holder := open(semaphore.WithWatchdog(600 * time.Millisecond))
	o := dsync.WithOwner(ctx)
	if err := holder.Acquire(o, 1); err != nil {
		t.Fatal(err)
	}
	waiter := open(semaphore.WithWaiterTimeout(3 * time.Second))
	acquired := make(chan error, 1)
	wctx, wcancel := context.WithCancel(ctx)
	t.Cleanup(wcancel)
	go func() { acquired <- waiter.Acquire(wctx, 1) }()
	waitFor(t, "the waiter to queue", func() bool {
		st, err := admin.State(ctx)
		return err == nil && st.Queued == 1
	})

	code, stdout, stderr := runCmd(t, "", "force-unlock", "-redis", m.Addr(), "-kind", "semaphore", "-yes", "kept")
	if code != exitOK || !strings.Contains(stdout, "force-unlocked") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	newcomer := open()
	if ok, err := newcomer.TryAcquire(ctx, 2); ok || !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("TryAcquire(2) after force-unlock, with a capacity of 1 set = %v, %v; want ErrInvalidPermits", ok, err)
	}
	if ok, err := newcomer.TryAcquire(ctx, 1); ok || err != nil {
		t.Errorf("TryAcquire(1) after force-unlock, with a waiter queued = %v, %v; want false", ok, err)
		if ok {
			newcomer.Release(ctx, 1)
		}
	}
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the permit within 10s")
	}
	if err := waiter.Release(ctx, 1); err != nil {
		t.Error(err)
	}
	if err := admin.SetCapacity(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if keys := m.Keys(); len(keys) > 0 {
		t.Errorf("keys left by a free semaphore whose capacity was cleared: %v", keys)
	}
}
