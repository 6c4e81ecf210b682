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

// TestAcquireOverForeignQueueWritesNothing: with a capacity set at
// runtime, a waiter's attempt whose state is gone (deleted behind dsync's
// back) takes the shared form, and fails on a queue key dsync did not
// write (ErrUnexpectedReply): an error reply ran nothing (backend rule 2;
// state.lua: a key dsync did not write fails the script before any
// write). The holders key the vanished state left must still list its
// holder.
func TestAcquireOverForeignQueueWritesNothing(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, foreign := range []string{":queue", ":expiry"} {
		name := "acqforeign-" + dsync.NewID()[:8]
		key := "dsync:semaphore:{" + name + "}"
		b := srv.NewBackend(t)
		holder := semaphore.New(b, name, 2, semaphore.WithLogger(nil))
		// A short waiter timeout: the waiter's heartbeat, an attempt by
		// the script, comes within a fraction of it.
		waiter := semaphore.New(b, name, 2, semaphore.WithLogger(nil), semaphore.WithWaiterTimeout(300*time.Millisecond))
		if err := holder.SetCapacity(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := holder.Acquire(dsync.WithOwner(ctx), 1); err != nil {
			t.Fatal(err)
		}
		got := acquire(dsync.WithOwner(ctx), waiter, 1)
		awaitState(t, ctx, holder, "the waiter queued", func(st semaphore.State) bool { return st.Queued == 1 })
		// The state vanishes; the holders key stays, and the queue (or
		// its expiry, the waiter's entry left in the queue) is foreign.
		if _, err := srv.Do(ctx, "DEL", key, key+foreign); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Do(ctx, "SET", key+foreign, "x"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if !errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("%s: the waiter's Acquire over a foreign %s = %v; want ErrUnexpectedReply", foreign, foreign, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the waiter's Acquire still waits 5s after its queue turned foreign", foreign)
		}
		if n, err := redis.Int(srv.Do(ctx, "ZCARD", key+":holders")); err != nil || n != 1 {
			t.Errorf("%s: holders after attempts that replied errors lists %d, %v; want the holder (an error reply ran nothing)", foreign, n, err)
		}
		if n, err := redis.Int(srv.Do(ctx, "EXISTS", key)); err != nil || n != 0 {
			t.Errorf("%s: the state after attempts that replied errors: EXISTS = %d, %v; want 0", foreign, n, err)
		}
		srv.Do(ctx, "DEL", key, key+":holders", key+":capacity", key+":queue", key+":expiry")
	}
}
