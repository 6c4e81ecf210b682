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

// TestSetCapacityOverForeignQueueWritesNothing: a SetCapacity that fails
// on a queue key dsync did not write (ErrUnexpectedReply) leaves no
// capacity behind. A capacity key with no state is one that no plain SET
// NX sees: the handles' plain acquisitions would go by their own capacity
// while every script went by the one the failed call reported it had not
// set.
func TestSetCapacityOverForeignQueueWritesNothing(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, queue := range []string{":queue", ":expiry"} {
		name := "foreigncap-" + dsync.NewID()[:8]
		key := "dsync:semaphore:{" + name + "}"
		sem := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLogger(nil))
		if queue == ":expiry" {
			// A waiter's entry in the queue, whose expiry key is foreign.
			if _, err := srv.Do(ctx, "ZADD", key+":queue", 1, "w"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := srv.Do(ctx, "SET", key+queue, "x"); err != nil {
			t.Fatal(err)
		}
		if err := sem.SetCapacity(ctx, 1); !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("%s: SetCapacity(1) over a foreign %s = %v; want ErrUnexpectedReply", queue, queue, err)
		}
		if n, err := redis.Int(srv.Do(ctx, "EXISTS", key, key+":capacity")); err != nil || n != 0 {
			t.Errorf("%s: the state and capacity keys after a SetCapacity that failed: %d exist, %v; want none written", queue, n, err)
		}
		srv.Do(ctx, "DEL", key, key+":capacity", key+":queue", key+":expiry")
	}
}
