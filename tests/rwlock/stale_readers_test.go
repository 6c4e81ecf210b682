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
	key, open, lost := lostReaders(t, ctx, srv, "stale", lease)
	c := open()
	a, ao, b, bo := lost[0].m, lost[0].o, lost[1].m, lost[1].o

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

// heldRead is a read hold: the handle and the owner that holds through it.
type heldRead struct {
	m *rwlock.RWMutex
	o context.Context
}

// lostReaders has two readers take the read lock of a fresh name with
// prefix, on watchdog leases of lease, on srv, and deletes the lock's main
// key behind them, as an eviction would: their holds are lost. It returns
// the main key, a way to open more handles of the lock, and the readers.
func lostReaders(t *testing.T, ctx context.Context, srv *testserver.Server, prefix string, lease time.Duration) (key string, open func() *rwlock.RWMutex, lost [2]heldRead) {
	t.Helper()
	name := prefix + "-" + dsync.NewID()[:8]
	key = "dsync:rwlock:{" + name + "}"
	open = func() *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), name, rwlock.WithWatchdog(lease), rwlock.WithLogger(nil))
	}
	for i := range lost {
		lost[i] = heldRead{open(), dsync.WithOwner(ctx)}
		if err := lost[i].m.RLockContext(lost[i].o); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := redis.Int(srv.Do(ctx, "DEL", key)); err != nil || n != 1 {
		t.Fatalf("DEL %s = %d, %v", key, n, err)
	}
	return key, open, lost
}
