package main

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestRunPasswordNotInArgv: with the password in $DSYNC_REDIS, neither
// dsync run nor the command it runs has it in its argv, which ps shows
// every user of the machine.
func TestRunPasswordNotInArgv(t *testing.T) {
	srv := startServer(t)
	do(t, srv.Addr(), "CONFIG", "SET", "requirepass", "argvsecret")
	p := startDsync(t, []string{envRedis + "=redis://:argvsecret@" + srv.Addr()}, "run", testLockName(t), "--",
		"sh", "-c", `echo "ready $$"; exec sleep 60`)
	pid, _ := p.expect(t, "ready ")
	killGroupAtEnd(t, pid)
	for _, proc := range []string{strconv.Itoa(p.cmd.Process.Pid), strings.TrimSpace(pid)} {
		// The child says "ready" and then execs sleep: its cmdline reads
		// empty while the exec is under way.
		var argv []byte
		for i := 0; i < 200 && len(argv) == 0; i++ {
			if i > 0 {
				time.Sleep(10 * time.Millisecond)
			}
			var err error
			if argv, err = os.ReadFile("/proc/" + proc + "/cmdline"); err != nil {
				t.Fatal(err)
			}
		}
		if strings.Contains(string(argv), "argvsecret") || len(argv) == 0 {
			t.Errorf("process %s has argv %q", proc, argv)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d\nstderr:\n%s", code, 128+int(syscall.SIGTERM), &p.stderr)
	}
}
