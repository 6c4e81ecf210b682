package mutex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// TestLockGivenUpOnStalledServerLeavesNothing: the server stalls (DEBUG
// SLEEP) for longer than a Lock's deadline plus its grace, with the Lock's
// SET (or script) already sent; the Lock returns the context's error in
// time, and once the server runs the queued calls, the acquisition it
// gave up is undone: the mutex is free, not held for a lease by nobody.
func TestLockGivenUpOnStalledServerLeavesNothing(t *testing.T) {
	srv := testserver.Real(t)
	for _, contended := range []bool{false, true} {
		name := uniqueName("stall")
		b := srv.NewBackend(t)
		m := mutex.New(b, name, mutex.WithLogger(nil))
		if contended {
			// The handle's next attempt goes to the script.
			holder := mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil))
			holder.Lock()
			if ok, err := m.TryLockContext(context.Background()); ok || err != nil {
				t.Fatalf("TryLock while held: %v, %v", ok, err)
			}
			holder.Unlock()
		}
		paused := make(chan error, 1)
		go func() { paused <- srv.Pause(context.Background(), 1500*time.Millisecond) }()
		time.Sleep(50 * time.Millisecond) // the server is asleep
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		err := m.LockContext(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("contended %v: Lock on a stalled server: %v, want DeadlineExceeded", contended, err)
		}
		if took > 600*time.Millisecond {
			t.Errorf("contended %v: Lock returned %v after it began, its deadline 100ms", contended, took)
		}
		if err := <-paused; err != nil {
			t.Fatal(err)
		}
		// The server has run what was queued: the SET, then the clean-up
		// (or the other way round).
		deadline := time.Now().Add(7 * time.Second)
		for {
			locked, err := mutex.New(srv.NewBackend(t), name).IsLocked(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !locked {
				break
			}
			if time.Now().After(deadline) {
				ttl, _ := m.TTL(context.Background())
				t.Fatalf("contended %v: the mutex is still held %v after the stall, by an acquisition given up (%v left of its lease)", contended, time.Since(start), ttl)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
