package bench

import (
	"context"
	"testing"
	"time"
)

// ManyWaiters waits until every waiter has registered on the server, then
// releases the lock and counts each waiter's acquisition.
func TestManyWaitersAllAcquire(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := ManyWaiters(ctx, addr, 30)
	if err != nil {
		t.Fatal(err)
	}
	if r.Acquired != 30 || r.PubSubConns < 1 || r.Elapsed <= 0 {
		t.Errorf("%d acquired, %d pub/sub connections, in %v; want 30, at least 1", r.Acquired, r.PubSubConns, r.Elapsed)
	}
}
