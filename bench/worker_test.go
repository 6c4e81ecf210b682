package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/testserver"
)

func redisAddr(t *testing.T) string {
	t.Helper()
	if !testserver.RedisAvailable() {
		t.Skip("redis-server not on PATH and DSYNC_REDIS_ADDR not set")
	}
	if server == nil {
		s, err := testserver.StartRedis()
		if err != nil {
			t.Fatal(err)
		}
		server = s
	}
	return server.Addr()
}

func TestContendedInProcesses(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"dsync", "dsync-fair", "redsync"} {
		impl := impl(t, name)
		r, err := Contended(ctx, addr, impl, 3, 0, 300*time.Millisecond, 0, spawn)
		if err != nil {
			t.Fatalf("%s: %v", impl.Name, err)
		}
		if r.Acquisitions < 3 || int64(len(r.Waits)) < r.Acquisitions {
			t.Errorf("%s: %d acquisitions, %d waits; want at least 3, and a wait each", impl.Name, r.Acquisitions, len(r.Waits))
		}
		// Counted in the workers and reported back.
		if r.Commands < r.Acquisitions || r.ServerCalls < r.Acquisitions || r.Goroutines < 3 {
			t.Errorf("%s: %d commands, %d server calls, %d goroutines for %d acquisitions by 3 processes",
				impl.Name, r.Commands, r.ServerCalls, r.Goroutines, r.Acquisitions)
		}
		if impl.Name == "dsync" && r.PubSubConns < 1 {
			t.Errorf("dsync: %d pub/sub connections while 3 processes contend", r.PubSubConns)
		}
	}
}

func TestHandoffToAnotherProcess(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Handoff(ctx, addr, Impls()[0], 3, spawn)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Waits) != 3 || len(r.IdlePings) != 3 {
		t.Fatalf("%d waits, %d pings; want 3 each", len(r.Waits), len(r.IdlePings))
	}
	// Timed by the wall clocks of two processes: positive, and well under
	// the waiter's heartbeat, so it was the release that woke it.
	for _, w := range r.Waits {
		if w <= 0 || w > time.Second {
			t.Errorf("handoff took %v", w)
		}
	}
}

func TestRingPassesTheToken(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const members, d = 3, 400 * time.Millisecond
	for _, mode := range []struct {
		name  string
		spawn Spawn
	}{{"processes", spawn}, {"goroutines", nil}} {
		counts, err := ring(ctx, addr, members, time.Millisecond, d, mode.spawn)
		if err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
		// The token goes round in order, so no member held it more than
		// once more than another; one holds at a time, each for at least
		// 1ms, so fewer than 400 in all; and it went round many times.
		var n int64
		for _, c := range counts {
			n += c
			if c < slices.Min(counts) || c > slices.Min(counts)+1 {
				t.Errorf("%s: members held the token %v times; want within one of each other", mode.name, counts)
				break
			}
		}
		if n < 100 || n >= d.Milliseconds() {
			t.Errorf("%s: %d hand-offs in %v with a 1ms hold; want at least 100 and fewer than %d", mode.name, n, d, d.Milliseconds())
		}
	}
	if _, err := Ring(ctx, addr, 1, time.Millisecond, time.Second, nil); err == nil {
		t.Error("a ring of one member: no error")
	}
}

// A hold longer than the rest of the run still ends it cleanly: the
// token finishes the hold it is in and goes round once more.
func TestRingHoldPastTheDeadline(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts, err := ring(ctx, addr, 3, 1500*time.Millisecond, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 0, 0}; !slices.Equal(counts, want) {
		t.Errorf("held %v times, want %v: the first hold, then the end", counts, want)
	}
}
