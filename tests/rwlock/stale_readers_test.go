package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// The readers' keys of a lock whose main key vanished (deleted, or
// evicted: maxmemory takes keys one at a time) stay until their readers'
// next scripts clean them up, and a lone reader may meanwhile take the
// free lock in its plain form with a SET NX, beside them. Those keys
// carry no hold of that reader: their loss costs it nothing. The eviction
// fault test counts on it, telling such an eviction from one that loses a
// hold.
func TestStaleReadersCarryNoHold(t *testing.T) {
	srv := testserver.Real(t)
	const lease = 600 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	name := "stale-" + dsync.NewID()[:8]
	key := "dsync:rwlock:{" + name + "}"
	open := func() *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), name, rwlock.WithWatchdog(lease), rwlock.WithLogger(nil))
	}
	a, b, c := open(), open(), open()

	// Two readers: the shared form, with the readers' keys.
	ao, bo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	if err := a.RLockContext(ao); err != nil {
		t.Fatal(err)
	}
	if err := b.RLockContext(bo); err != nil {
		t.Fatal(err)
	}
	if n, err := redis.Int(srv.Do(ctx, "DEL", key)); err != nil || n != 1 {
		t.Fatalf("DEL %s = %d, %v", key, n, err)
	}

	// C reads alone, beside the readers' keys left behind.
	co := dsync.WithOwner(ctx)
	if err := c.RLockContext(co); err != nil {
		t.Fatal(err)
	}
	typ, err := redis.String(srv.Do(ctx, "TYPE", key))
	if err != nil {
		t.Fatal(err)
	}
	n, err := redis.Int(srv.Do(ctx, "DEL", key+":readers", key+":rexpiry"))
	if err != nil {
		t.Fatal(err)
	}
	if typ != "string" || n != 2 {
		t.Fatalf("C's read hold beside the readers' keys left behind: the main key is a %s, and DEL removed %d of the 2 readers' keys; want a string (the plain form) and 2", typ, n)
	}

	// A and B lost theirs with the main key, and are told.
	for i, done := range []<-chan struct{}{a.RDone(ao), b.RDone(bo)} {
		select {
		case <-done:
		case <-time.After(lease):
			t.Fatalf("reader %d not told within %v that the main key went", i+1, lease)
		}
	}
	// Two renewals later (time is what is tested) C still reads, and
	// lets go.
	select {
	case <-c.RDone(co):
		t.Fatal("C was told its read hold is lost when the readers' keys left behind went")
	case <-time.After(lease):
	}
	if err := c.RUnlockContext(co); err != nil {
		t.Fatalf("C's release after the readers' keys left behind went: %v; want nil", err)
	}
	if n, err := redis.Int(srv.Do(ctx, "EXISTS", key)); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after C's release = %d, %v; want 0", key, n, err)
	}
}
