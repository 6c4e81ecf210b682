package main

import (
	"context"
	"strings"
	"testing"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/mutex"
)

func TestForceUnlock(t *testing.T) {
	m := startMini(t)
	ctx := dsync.WithOwner(context.Background())
	holder, _ := dsync.OwnerFrom(ctx)
	mu := mutex.New(newBackend(t, m.Addr()), "jobs:9")
	for range 2 {
		if err := mu.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	locked := func() bool {
		t.Helper()
		ok, err := mu.IsLocked(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	// Answering no (or nothing) leaves it locked.
	for _, answer := range []string{"n\n", "\n", "", "nope\n"} {
		code, stdout, stderr := runCmd(t, answer, "force-unlock", "-redis", m.Addr(), "jobs:9")
		prompt := `force-unlock mutex "jobs:9" held by ` + holder + "? [y/N]"
		if code != exitFailure || !strings.Contains(stderr, prompt) || !locked() {
			t.Errorf("answer %q: exit %d, locked %v\nstdout:\n%s\nstderr:\n%s", answer, code, locked(), stdout, stderr)
		}
	}

	// -yes unlocks without asking.
	code, stdout, stderr := runCmd(t, "", "force-unlock", "jobs:9", "-redis", m.Addr(), "-yes")
	if code != exitOK || locked() || strings.Contains(stderr, "[y/N]") || !strings.Contains(stdout, "force-unlocked") {
		t.Errorf("-yes: exit %d, locked %v\nstdout:\n%s\nstderr:\n%s", code, locked(), stdout, stderr)
	}
	// The holder has lost it.
	if err := mu.UnlockContext(ctx); err == nil {
		t.Error("the holder's unlock after force-unlock succeeded")
	}

	// Unlocking a free lock is not an error.
	code, stdout, _ = runCmd(t, "", "force-unlock", "-redis", m.Addr(), "-yes", "jobs:9")
	if code != exitOK || !strings.Contains(stdout, "not locked") {
		t.Errorf("free lock: exit %d\n%s", code, stdout)
	}
}

func TestForceUnlockFairlockConfirmed(t *testing.T) {
	m := startMini(t)
	ctx := dsync.WithOwner(context.Background())
	fl := fairlock.New(newBackend(t, m.Addr()), "q")
	if err := fl.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer fl.UnlockContext(ctx)
	// A mutex of the same name is another lock.
	code, stdout, _ := runCmd(t, "", "force-unlock", "-redis", m.Addr(), "-yes", "q")
	if code != exitOK || !strings.Contains(stdout, "not locked") {
		t.Errorf("mutex q: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr := runCmd(t, "Y\n", "force-unlock", "-redis", m.Addr(), "-kind", "fairlock", "q")
	if code != exitOK || !strings.Contains(stderr, `force-unlock fairlock "q" held by`) || !strings.Contains(stdout, "force-unlocked") {
		t.Errorf("answer Y: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if ok, err := fl.IsLocked(ctx); err != nil || ok {
		t.Errorf("after force-unlock: locked %v, %v", ok, err)
	}
}
