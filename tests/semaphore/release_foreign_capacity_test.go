package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// TestReleaseOverForeignCapacityWritesNothing: a release whose state is
// gone fails on a capacity key dsync did not write, and an error reply
// says the call ran nothing (backend rule 2; state.lua: a key dsync did
// not write fails the script before any write). The holders key left by a
// vanished state must still be there.
func TestReleaseOverForeignCapacityWritesNothing(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "relforeign-" + dsync.NewID()[:8]
	key := "dsync:semaphore:{" + name + "}"
	sem := semaphore.New(srv.NewBackend(t), name, 2, semaphore.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	if err := sem.Acquire(o, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "DEL", key); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "ZADD", key+":holders", time.Now().Add(time.Minute).UnixMilli(), "lost"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "SET", key+":capacity", "many"); err != nil {
		t.Fatal(err)
	}
	err := sem.Release(o, 1)
	n, xerr := redis.Int(srv.Do(ctx, "EXISTS", key+":holders"))
	t.Logf("Release = %v", err)
	if xerr != nil || n != 1 {
		t.Errorf("holders after a release that replied %v: EXISTS = %d, %v; want 1 (an error reply ran nothing)", err, n, xerr)
	}
	srv.Do(ctx, "DEL", key, key+":holders", key+":capacity")
}
