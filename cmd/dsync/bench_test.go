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
