//go:build unix

package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGINT sends the process a real SIGINT while run runs the demo: run
// catches it, and the demo ends with status 130.
func TestSIGINT(t *testing.T) {
	stdout := newWatchWriter("acquired after")
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"demo", "-workers", "2", "-rounds", "1000", "-hold", "20ms"}, strings.NewReader(""), stdout, &stderr)
	}()
	select {
	case <-stdout.seen: // run's signal handler is installed by now
	case code := <-done:
		t.Fatalf("demo ended with %d before the signal\n%s\n%s", code, stdout, &stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("no acquisition within 10s")
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitInterrupted {
			t.Errorf("exit %d, want %d\n%s\n%s", code, exitInterrupted, stdout, &stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("demo did not end within 10s of SIGINT")
	}
	if !strings.Contains(stdout.String(), "of 2000 acquisitions") {
		t.Errorf("no partial report:\n%s", stdout)
	}
}
