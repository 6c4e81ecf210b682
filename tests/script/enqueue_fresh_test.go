package script_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/script"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// enqueueOnce enqueues ARGV[1] at KEYS[1] (queue) and KEYS[2] (expiry),
// fresh if ARGV[2] is '1', and replies the queue's length.
var enqueueOnce = script.New(script.Queue, `enqueue(KEYS[1], KEYS[2], ARGV[1], 1000, 5000, ARGV[2] == '1')
return redis.call('ZCARD', KEYS[1])
`)

// An acquisition's first registering attempt enqueues a waiter id of its
// own, which cannot be queued yet: it spares the ZSCORE that looks for
// the entry, one command on every contended acquisition. A later attempt
// (a heartbeat, or a retry of a registration whose reply was lost) looks,
// and leaves the entry where it was.
func TestFreshEnqueueDoesNotLookForItsEntry(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := srv.NewBackend(t)
	keys := []string{"{enqueue-fresh}:queue", "{enqueue-fresh}:expiry"}
	if _, err := b.Eval(ctx, enqueueOnce, keys, "warm", "1"); err != nil { // loads the script
		t.Fatal(err)
	}
	// The count is the server's: one clean round proves the point on a
	// server that other tests share (see TestScriptReadsTheClockOncePerCall).
	var fresh, looked []int64
	for round := range 5 {
		before := calls(t, srv, "zscore")
		n, err := b.Eval(ctx, enqueueOnce, keys, "w"+strconv.Itoa(round), "1")
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(round+2) {
			t.Fatalf("queue length after a fresh entry: %v; want %d", n, round+2)
		}
		mid := calls(t, srv, "zscore")
		if n, err := b.Eval(ctx, enqueueOnce, keys, "w"+strconv.Itoa(round), "0"); err != nil || n != int64(round+2) {
			t.Fatalf("queue length after the same entry again: %v, %v; want %d", n, err, round+2)
		}
		after := calls(t, srv, "zscore")
		if mid-before == 0 && after-mid == 1 {
			return
		}
		fresh, looked = append(fresh, mid-before), append(looked, after-mid)
	}
	t.Errorf("ZSCORE calls: %v for a fresh entry (want 0), %v for one queued already (want 1)", fresh, looked)
}
