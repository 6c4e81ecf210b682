package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/testserver"
)

// TestBenchInterrupt interrupts a bench run (contenders in this process,
// on a private redis-server): it ends at once with status 130 and says
// how far it got.
func TestBenchInterrupt(t *testing.T) {
	if !testserver.RedisAvailable() {
		t.Skip("redis-server is not on PATH")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"bench", "-inprocess", "-duration", "1s", "-uncontended", "400", "-handoffs", "5",
			"-waiters", "0", "-held", "0"}, strings.NewReader(""), &stdout, &stderr)
	}()
	select {
	case code := <-done:
		t.Fatalf("bench ended with %d before the interrupt\n%s\n%s", code, &stdout, &stderr)
	case <-time.After(1500 * time.Millisecond): // the interrupt comes at some point of the run
	}
	cancel()
	select {
	case code := <-done:
		if code != exitInterrupted {
			t.Errorf("exit %d, want %d\n%s\n%s", code, exitInterrupted, &stdout, &stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("bench did not end within 15s of the interrupt")
	}
	if out := stdout.String(); !strings.Contains(out, "bench interrupted after") || !strings.Contains(out, "interrupted during: ") {
		t.Errorf("stdout:\n%s", out)
	}
	if strings.Contains(stderr.String(), "\r") {
		t.Errorf("progress written to a stderr that is not a terminal: %q", &stderr)
	}
}

// bench -shape runs the service-shape table alone, on a private
// redis-server: every row at every number of goroutines asked for, and
// the targets, which it cannot judge without 64 goroutines.
func TestBenchShapeAlone(t *testing.T) {
	if !testserver.RedisAvailable() {
		t.Skip("redis-server is not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr syncBuffer
	code := runContext(ctx, []string{"bench", "-shape", "-shape-duration", "30ms", "-shape-rounds", "1", "-shape-goroutines", "1,2"},
		strings.NewReader(""), &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, &stdout, &stderr)
	}
	out := stdout.String()
	for _, want := range []string{"service shape: G goroutines share one client", "G=1, deadline", "G=2, deadline",
		"ping-redigo", "ping-rueidis", "dsync-redigo", "dsync-goredis", "dsync-rueidis", "redsync-redigo", "redsync-goredis",
		"redislock", "rueidislock", "the targets are at 64 goroutines, which this run did not measure", "run took"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// The table alone: none of the other scenarios ran.
	for _, not := range []string{"uncontended lock+unlock", "contended:", "RedLock", "G=64, deadline"} {
		if strings.Contains(out, not) {
			t.Errorf("%q in the output of -shape:\n%s", not, out)
		}
	}
}

// Bad service-shape flags are usage errors, found before any server is
// started.
func TestBenchShapeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-shape-goroutines", "1,0"},
		{"-shape-goroutines", "a"},
		{"-shape-goroutines", ""},
		{"-shape-duration", "0s"},
		{"-shape-rounds", "-1"},
		{"-shape", "-shape-rounds", "0"},
	} {
		var stdout, stderr syncBuffer
		code := runContext(context.Background(), append([]string{"bench", "-redis", "127.0.0.1:1"}, args...), strings.NewReader(""), &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("bench %q: exit %d, want %d\n%s", args, code, exitUsage, &stderr)
		}
	}
}
