package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/semaphore"
)

// The holders key of a shared state whose hash vanished (deleted, or
// evicted: maxmemory takes keys one at a time) stays until it expires,
// and a lone owner may meanwhile take the free semaphore in the single
// form with a plain SET NX, beside it. That holders key carries no hold:
// its loss costs the single-form holder nothing. The eviction fault test
// counts on it, telling such an eviction from one that loses a hold.
func TestStaleHoldersCarryNoHold(t *testing.T) {
	srv := ownServer(t)
	const lease = 600 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	name := "stale-" + dsync.NewID()[:8]
	key := "dsync:semaphore:{" + name + "}"
	open := func() *semaphore.Semaphore {
		return semaphore.New(srv.NewBackend(t), name, 3, semaphore.WithWatchdog(lease), semaphore.WithLogger(nil))
	}
	a, b, c := open(), open(), open()

	// A's hold in the shared form: another owner's permit, taken and
	// given back, leaves it so.
	ao, bo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	if err := a.Acquire(ao, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(bo, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(bo, 1); err != nil {
		t.Fatal(err)
	}
	if n, err := redis.Int(srv.Do(ctx, "DEL", key)); err != nil || n != 1 {
		t.Fatalf("DEL %s = %d, %v", key, n, err)
	}
	select {
	case <-a.Done(ao):
	case <-time.After(lease):
		t.Fatalf("A's Done still open %v after its state was deleted", lease)
	}

	// C takes the free semaphore alone, beside the holders left behind.
	co := dsync.WithOwner(ctx)
	if err := c.Acquire(co, 1); err != nil {
		t.Fatal(err)
	}
	typ, err := redis.String(srv.Do(ctx, "TYPE", key))
	if err != nil {
		t.Fatal(err)
	}
	n, err := redis.Int(srv.Do(ctx, "DEL", key+":holders"))
	if err != nil {
		t.Fatal(err)
	}
	if typ != "string" || n != 1 {
		t.Fatalf("C's hold beside the holders left behind: the state is a %s, and DEL holders removed %d keys; want a string (the single form) and 1", typ, n)
	}

	// Two renewals later (time is what is tested) C still holds, and
	// gives its permit back.
	select {
	case <-c.Done(co):
		t.Fatal("C was told its hold is lost when the holders key left behind went")
	case <-time.After(lease):
	}
	if err := c.Release(co, 1); err != nil {
		t.Fatalf("C's release after the holders key left behind went: %v; want nil", err)
	}
	if n, err := redis.Int(srv.Do(ctx, "EXISTS", key)); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after C's release = %d, %v; want 0", key, n, err)
	}
}
