package rwlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestCancelledContexts: releases with a cancelled ctx still
// release; acquisitions with one fail with ctx's error and leave nothing.
func TestCancelledContexts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		m := rwlock.New(fake.FakeBackend(t, srv), "cx", rwlock.WithLogger(nil))
		cctx, cancel := context.WithCancel(ctx)
		o := dsync.WithOwner(cctx)
		if err := m.RLockContext(o); err != nil {
			t.Fatal(err)
		}
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
		if err := m.LockContext(dsync.WithOwner(tctx)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a writer behind a reader: %v; want DeadlineExceeded", err)
		}
		tcancel()
		cancel()
		if err := m.RLockContext(o); !errors.Is(err, context.Canceled) {
			t.Errorf("RLockContext(cancelled) = %v", err)
		}
		if ok, err := m.TryRLockContext(o); ok || !errors.Is(err, context.Canceled) {
			t.Errorf("TryRLockContext(cancelled) = %v, %v", ok, err)
		}
		if err := m.RUnlockContext(o); err != nil {
			t.Errorf("RUnlockContext(cancelled) = %v; a release does not depend on ctx", err)
		}
		if st := state(t, ctx, m); st.Mode != rwlock.Free || st.WaitingWriters != 0 {
			t.Errorf("after RUnlock with a cancelled ctx: %+v", st)
		}
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		ow := dsync.WithOwner(dctx)
		if err := m.LockContext(ow); err != nil {
			t.Fatal(err)
		}
		if err := m.RLockContext(ow); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		dcancel()
		if err := m.UnlockContext(ow); err != nil {
			t.Errorf("UnlockContext(expired) = %v", err)
		}
		if err := m.RUnlockContext(ow); err != nil {
			t.Errorf("RUnlockContext(expired) = %v", err)
		}
		if st := state(t, ctx, m); st.Mode != rwlock.Free {
			t.Errorf("at the end: %+v", st)
		}
		time.Sleep(time.Minute)
	})
}

// TestOwnerlessAcrossGoroutines: ownerless RLock in some
// goroutines, RUnlock in others, on one handle, then Lock/Unlock likewise.
func TestOwnerlessAcrossGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		m := rwlock.New(fake.FakeBackend(t, srv), "anon", rwlock.WithLogger(nil))
		const n = 20
		var wg sync.WaitGroup
		for range n {
			wg.Go(m.RLock)
		}
		wg.Wait()
		if st := state(t, ctx, m); st.Readers != n {
			t.Errorf("after %d ownerless RLocks: %+v", n, st)
		}
		for range n {
			wg.Go(m.RUnlock)
		}
		wg.Wait()
		if st := state(t, ctx, m); st.Mode != rwlock.Free {
			t.Errorf("after %d RUnlocks from other goroutines: %+v", n, st)
		}
		done := make(chan struct{})
		go func() { m.Lock(); close(done) }()
		<-done
		go m.Unlock()
		synctest.Wait()
		if st := state(t, ctx, m); st.Mode != rwlock.Free {
			t.Errorf("after Lock, Unlock in another goroutine: %+v", st)
		}
		time.Sleep(time.Minute)
	})
}
