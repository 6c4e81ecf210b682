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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name    string
		permits int64    // the capacity set, and what holder and waiter ask
		del     []string // deleted behind dsync's back, beside the state
		foreign string   // then made a string
		lowered bool     // the capacity key then says 1
	}{
		{"queue", 1, nil, ":queue", false},
		// The waiter's entry stays in the queue; its expiry is foreign.
		{"expiry", 1, []string{":expiry"}, ":expiry", false},
		// The queue is gone, so that nothing reads the expiry key before
		// the waiter asks for more than the capacity and is dequeued.
		{"expiry of an empty queue", 2, []string{":queue", ":expiry"}, ":expiry", true},
	} {
		name := "acqforeign-" + dsync.NewID()[:8]
		key := "dsync:semaphore:{" + name + "}"
		b := srv.NewBackend(t)
		holder := semaphore.New(b, name, 2, semaphore.WithLogger(nil))
		// A short waiter timeout: the waiter's heartbeat, an attempt by
		// the script, comes within a fraction of it.
		waiter := semaphore.New(b, name, 2, semaphore.WithLogger(nil), semaphore.WithWaiterTimeout(300*time.Millisecond))
		if err := holder.SetCapacity(ctx, c.permits); err != nil {
			t.Fatal(err)
		}
		if err := holder.Acquire(dsync.WithOwner(ctx), c.permits); err != nil {
			t.Fatal(err)
		}
		got := acquire(dsync.WithOwner(ctx), waiter, c.permits)
		awaitState(t, ctx, holder, "the waiter queued", func(st semaphore.State) bool { return st.Queued == 1 })
		// The state vanishes; the holders key stays.
		for _, k := range append([]string{""}, c.del...) {
			if _, err := srv.Do(ctx, "DEL", key+k); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := srv.Do(ctx, "SET", key+c.foreign, "x"); err != nil {
			t.Fatal(err)
		}
		if c.lowered {
			if _, err := srv.Do(ctx, "SET", key+":capacity", "1"); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-got:
			if !errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("%s: the waiter's Acquire over a foreign %s = %v; want ErrUnexpectedReply", c.name, c.foreign, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the waiter's Acquire still waits 5s after %s turned foreign", c.name, c.foreign)
		}
		if n, err := redis.Int(srv.Do(ctx, "ZCARD", key+":holders")); err != nil || n != 1 {
			t.Errorf("%s: holders after attempts that replied errors lists %d, %v; want the holder (an error reply ran nothing)", c.name, n, err)
		}
		if n, err := redis.Int(srv.Do(ctx, "EXISTS", key)); err != nil || n != 0 {
			t.Errorf("%s: the state after attempts that replied errors: EXISTS = %d, %v; want 0", c.name, n, err)
		}
		srv.Do(ctx, "DEL", key, key+":holders", key+":capacity", key+":queue", key+":expiry")
	}
}
