package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// Owners whose permits were lost with the state's hash (deleted, or
// evicted: maxmemory takes keys one at a time) are not counted as holders
// once a later lone owner's single form is turned into the shared one
// beside the holders key they left behind. A and B hold a permit each in
// the shared form; the hash is deleted; C takes the free semaphore alone
// (one SET NX, the single form), and D's acquisition turns C's hold into
// the shared form. A and B are told, and their releases fail with
// ErrNotHeld; the semaphore counts 2 holders (C and D) of 2 permits.
func TestLostHoldersNotCountedAfterUnfold(t *testing.T) {
	srv := testserver.Real(t)
	// A long lease: the lost owners' entries in holders stay live past
	// every step below, as they would under the default one.
	const lease = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "unfold-" + dsync.NewID()[:8]
	key := "dsync:semaphore:{" + name + "}"
	open := func() *semaphore.Semaphore {
		return semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithWatchdog(lease), semaphore.WithLogger(nil))
	}
	a, b, c, d := open(), open(), open(), open()
	ao, bo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	start := time.Now()
	if err := a.Acquire(ao, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(bo, 1); err != nil {
		t.Fatal(err)
	}
	if n, err := redis.Int(srv.Do(ctx, "DEL", key)); err != nil || n != 1 {
		t.Fatalf("DEL %s = %d, %v", key, n, err)
	}
	co, do := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	if err := c.Acquire(co, 1); err != nil {
		t.Fatal(err)
	}
	if typ, err := redis.String(srv.Do(ctx, "TYPE", key)); err != nil || typ != "string" {
		t.Fatalf("C's lone hold: the state is a %s (%v); want a string, the single form", typ, err)
	}
	if err := d.Acquire(do, 1); err != nil {
		t.Fatal(err)
	}
	st, err := d.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e := time.Since(start); e > lease/2 {
		t.Skipf("the steps took %v, near the lost owners' lease end: the case did not happen", e)
	}
	if st.Held != 2 || st.Holders != 2 {
		t.Errorf("after D's acquisition the semaphore counts %d permits held by %d holders; want 2 by 2 (C and D), the lost A and B not among them", st.Held, st.Holders)
	}
	for i, done := range []<-chan struct{}{a.Done(ao), b.Done(bo)} {
		select {
		case <-done:
		case <-time.After(time.Until(start.Add(lease))):
			t.Errorf("lost owner %d not told within its lease", i+1)
		}
	}
	if err := a.Release(ao, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("lost owner A's Release = %v; want ErrNotHeld", err)
	}
	for _, h := range []struct {
		s *semaphore.Semaphore
		o context.Context
	}{{c, co}, {d, do}} {
		if err := h.s.Release(h.o, 1); err != nil {
			t.Errorf("a live owner's Release: %v", err)
		}
	}
	b.Release(bo, 1)
}
