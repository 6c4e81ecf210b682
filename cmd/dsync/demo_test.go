package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/testserver"
)

// asDsyncEnv, set to 1 in the environment of the test binary, makes it
// dsync itself: tests start it so to run dsync as a process of its own.
const asDsyncEnv = "DSYNC_TEST_AS_DSYNC"

// TestMain runs the tests, stops the servers they shared and fails if a
// goroutine was left behind; or, under asDsyncEnv, runs dsync.
func TestMain(m *testing.M) {
	if os.Getenv(asDsyncEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	testserver.Main(m)
}

func TestDemo(t *testing.T) {
	code, stdout, stderr := runCmd(t, "", "demo", "-workers", "3", "-rounds", "4", "-hold", "1ms")
	if code != exitOK {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"embedded miniredis",
		"12 acquisitions",
		"overlaps (two holders at once): 0",
		"fencing tokens strictly increasing in acquisition order: true",
		"hold count 3); after 3 unlocks locked=false",
		"the holder was told its hold ended",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo report lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "removed the demo's") {
		t.Errorf("demo on the embedded server reports removing keys:\n%s", stdout)
	}
}

// With -metrics the demo prints the OpenTelemetry metrics of its run: the
// acquisitions it made, the holds released and the one lost to the fixed
// lease, and no waiter left.
func TestDemoMetrics(t *testing.T) {
	code, stdout, stderr := runCmd(t, "", "demo", "-metrics", "-workers", "3", "-rounds", "4", "-hold", "1ms")
	if code != exitOK {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"metrics (OpenTelemetry",
		"dsync.acquire.duration     {dsync.outcome=acquired dsync.primitive=mutex dsync.try=false} count 16 ",
		"dsync.hold.duration        {dsync.hold.end=released dsync.primitive=mutex}            count 13 ",
		"dsync.hold.lost            {dsync.lost.reason=lease expired dsync.primitive=mutex}    1",
		"dsync.waiters              {dsync.primitive=mutex}                                    0",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo -metrics lacks %q:\n%s", want, stdout)
		}
	}
}

// TestDemoRemovesKeys runs the demo against a server given by -redis (a
// miniredis of the test's) and checks that it leaves no key behind.
func TestDemoRemovesKeys(t *testing.T) {
	m := startMini(t)
	code, stdout, stderr := runCmd(t, "", "demo", "-redis", m.Addr(), "-workers", "2", "-rounds", "3", "-hold", "0s")
	if code != exitOK {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "removed the demo's") || !strings.Contains(stdout, "none is left") {
		t.Errorf("demo does not report removing its keys:\n%s", stdout)
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("demo left keys behind: %q\n%s", keys, stdout)
	}
}

// TestDemoInterrupt interrupts the demo once the first acquisition is
// printed: it exits 130, reports what it measured so far and still
// removes its keys.
func TestDemoInterrupt(t *testing.T) {
	m := startMini(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := newWatchWriter("acquired after")
	var stderr syncBuffer
	done := make(chan int, 1)
	start := time.Now()
	go func() {
		done <- runContext(ctx, []string{"demo", "-redis", m.Addr(), "-workers", "2", "-rounds", "1000", "-hold", "20ms"},
			strings.NewReader(""), stdout, &stderr)
	}()
	select {
	case <-stdout.seen:
	case code := <-done:
		t.Fatalf("demo ended with %d before the interrupt\n%s\n%s", code, stdout, &stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("no acquisition within 10s")
	}
	cancel()
	var code int
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("demo did not end within 10s of the interrupt")
	}
	out := stdout.String()
	if code != exitInterrupted {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, out, &stderr)
	}
	for _, want := range []string{"of 2000 acquisitions", "overlaps (two holders at once): 0", "interrupted", "removed the demo's"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr lacks interrupted: %s", &stderr)
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("interrupted demo left keys behind: %q", keys)
	}
	t.Logf("interrupted after %v", time.Since(start))
}
