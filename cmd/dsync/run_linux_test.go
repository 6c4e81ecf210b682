package main

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
)

// TestRunCommandDiesWithRun: on Linux, a dsync run killed with SIGKILL
// takes its command with it (the parent-death signal), so that the command
// does not work on without the lock once the lease has run out.
func TestRunCommandDiesWithRun(t *testing.T) {
	srv := testserver.Real(t)
	p := startDsync(t, nil, "run", "-redis", srv.Addr(), testLockName(t), "--", "sh", "-c", `echo "ready $$"; exec sleep 60`)
	pid, _ := p.expect(t, "ready ")
	killGroupAtEnd(t, pid)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	n, _ := strconv.Atoi(strings.TrimSpace(pid))
	waitFor(t, "the command to die with dsync run", func() bool {
		return errors.Is(syscall.Kill(n, 0), syscall.ESRCH)
	})
}
