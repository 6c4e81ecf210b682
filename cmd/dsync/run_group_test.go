//go:build unix

package main

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// straggler is the shell of a command that leaves behind a process of its
// group that ignores SIGTERM: "sh -c" runs a second shell in the
// background, which ignores SIGTERM, prints "armed PID" on standard output
// and becomes sleep, with the same pid. then is what the command's shell
// does next.
func straggler(then string) []string {
	return []string{"sh", "-c", `sh -c 'trap "" TERM; echo "armed $$"; exec sleep 60' & ` + then}
}

// armedPid reads the "armed PID" line of a straggler and returns the
// sleep's pid; the sleep's process group is killed when t ends.
func armedPid(t *testing.T, p *dsyncProc) int {
	t.Helper()
	s, _ := p.expect(t, "armed ")
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || pid <= 1 {
		t.Fatalf("bad pid %q", s)
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	killGroupAtEnd(t, strconv.Itoa(pgid))
	return pid
}

// gone reports whether no process has the id pid, not even a zombie.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// TestRunLostKillsGroupAfterLeaderDies: the lock is lost; SIGTERM ends
// the command's shell at once, but a process of its group ignores
// SIGTERM. It gets SIGKILL -grace after the SIGTERM all the same, and run
// exits only once it is gone.
func TestRunLostKillsGroupAfterLeaderDies(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	const lease, grace = 900 * time.Millisecond, 500 * time.Millisecond
	p := startDsync(t, nil, append([]string{"run", "-redis", srv.Addr(), "-lease", lease.String(), "-grace", grace.String(), name, "--"},
		straggler("wait")...)...)
	pid := armedPid(t, p)
	start := time.Now()
	if _, err := srv.Do(context.Background(), "DEL", "dsync:mutex:{"+name+"}"); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t)
	took := time.Since(start)
	alive := !gone(pid)
	t.Logf("DEL to run's exit: %v (lease %v, grace %v)", took.Round(time.Millisecond), lease, grace)
	if alive {
		t.Errorf("run exited while a process of the command's group (pid %d) still ran\nstderr:\n%s", pid, &p.stderr)
	}
	if code != exitLost || !strings.Contains(p.stderr.String(), "sending SIGKILL") {
		t.Errorf("exit %d, want %d after SIGKILL\nstderr:\n%s", code, exitLost, &p.stderr)
	}
	if took < grace {
		t.Errorf("run exited %v after DEL, before the grace period of %v was over", took, grace)
	}
}

// TestRunWaitsForGroupAfterCommandExits: the command's shell exits with
// status 0 and leaves behind a process of its group that ignores SIGTERM.
// run sends the group SIGTERM, then SIGKILL after -grace, keeps the lock
// until the group is gone, then releases it and exits with the command's
// status.
func TestRunWaitsForGroupAfterCommandExits(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	const grace = time.Second
	fifo := filepath.Join(t.TempDir(), "armed")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The background shell says "armed" through the fifo, which the
	// command's shell reads and prints before it exits: the straggler
	// ignores SIGTERM by the time the shell exits.
	cmd := []string{"sh", "-c", `sh -c 'trap "" TERM; echo "armed $$" >"$F"; exec sleep 60' & read line <"$F"; echo "$line"; exit 0`}
	p := startDsync(t, []string{"F=" + fifo}, append([]string{"run", "-redis", srv.Addr(), "-grace", grace.String(), name, "--"}, cmd...)...)
	pid := armedPid(t, p)
	start := time.Now()

	m := mutex.New(srv.NewBackend(t), name)
	st, err := m.State(context.Background())
	if alive := !gone(pid); err != nil || !st.Locked && alive {
		t.Errorf("the lock is %+v, %v while a process of the command's group still runs (%v)", st, err, alive)
	}
	code := p.wait(t)
	took := time.Since(start)
	alive := !gone(pid)
	t.Logf("the command's exit to run's: %v (grace %v)", took.Round(time.Millisecond), grace)
	if alive {
		t.Errorf("run exited while a process of the command's group (pid %d) still ran\nstderr:\n%s", pid, &p.stderr)
	}
	if code != 0 || !strings.Contains(p.stderr.String(), "sending SIGKILL") {
		t.Errorf("exit %d, want the command's 0 after SIGKILL to what it left\nstderr:\n%s", code, &p.stderr)
	}
	if took < grace {
		t.Errorf("run exited %v after the command, before the grace period of %v was over", took, grace)
	}
	if st, err := m.State(context.Background()); err != nil || st.Locked {
		t.Errorf("after run: the lock is %+v, %v, want released", st, err)
	}
}
