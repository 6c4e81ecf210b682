//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// dsyncProc is dsync run as a process of its own: the test binary, made
// dsync by asDsyncEnv (see TestMain).
type dsyncProc struct {
	cmd    *exec.Cmd
	lines  chan string // standard output, line by line; closed at its end
	stderr syncBuffer
	errEOF chan struct{} // closed when standard error is read to its end
	exited chan struct{} // closed when it has exited
	code   int           // its exit status, set before exited is closed
}

// startDsync starts dsync with args and the extra environment env. The
// process, and the process group of the command it runs if a test learned
// it, are killed when t ends.
func startDsync(t *testing.T, env []string, args ...string) *dsyncProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &dsyncProc{lines: make(chan string, 100), errEOF: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	// The race detector's second of sleep at exit (the test binary is
	// built with -race) would make every run end a second late.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	p.cmd.Env = append(os.Environ(), append([]string{asDsyncEnv + "=1", "GORACE=" + gorace}, env...)...)
	// Pipes of our own rather than exec's: the command's children may
	// keep them open after dsync exited, and Wait must not wait for them.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	er, ew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = w, ew
	err = p.cmd.Start()
	w.Close()
	ew.Close()
	if err != nil {
		r.Close()
		er.Close()
		t.Fatal(err)
	}
	go func() {
		defer close(p.errEOF)
		defer er.Close()
		io.Copy(&p.stderr, er)
	}()
	go func() {
		defer close(p.lines)
		defer r.Close()
		s := bufio.NewScanner(r)
		for s.Scan() {
			p.lines <- s.Text()
		}
	}()
	go func() {
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// expect returns the rest of the next line of standard output, which must
// start with prefix, and the time it was read. It waits at most 30s.
func (p *dsyncProc) expect(t *testing.T, prefix string) (string, time.Time) {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.exited
			p.drainStderr()
			t.Fatalf("dsync exited with %d before printing %q\nstderr:\n%s", p.code, prefix, &p.stderr)
		}
		if !strings.HasPrefix(line, prefix) {
			t.Fatalf("dsync printed %q, want %q\nstderr:\n%s", line, prefix, &p.stderr)
		}
		return strings.TrimPrefix(line, prefix), time.Now()
	case <-time.After(30 * time.Second):
		t.Fatalf("dsync did not print %q within 30s\nstderr:\n%s", prefix, &p.stderr)
	}
	panic("unreachable")
}

// wait waits at most 30s for the process to exit and returns its status.
func (p *dsyncProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
		p.drainStderr()
		return p.code
	case <-time.After(30 * time.Second):
		// Its goroutines, for the record.
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("dsync did not exit within 30s\nstderr:\n%s", &p.stderr)
	}
	return -1
}

// drainStderr waits, once dsync exited, until its standard error is read
// to the end: the process may exit before the goroutine copying it ran.
// The command's children may hold it open after dsync exited: then it
// waits half a second at most.
func (p *dsyncProc) drainStderr() {
	select {
	case <-p.errEOF:
	case <-time.After(500 * time.Millisecond):
	}
}

// killGroupAtEnd kills the process group of the command whose shell
// printed its pid (its group's id), when t ends: a shell's children
// outlive it if a test fails half-way.
func killGroupAtEnd(t *testing.T, pid string) {
	n, err := strconv.Atoi(strings.TrimSpace(pid))
	if err != nil || n <= 1 {
		t.Fatalf("bad pid %q", pid)
	}
	t.Cleanup(func() { syscall.Kill(-n, syscall.SIGKILL) })
}

// lockName returns a name of its own for the test.
func testLockName(t *testing.T) string {
	return "run:" + t.Name() + ":" + dsync.NewID()[:8]
}

// holdMutex takes the mutex called name on srv for the rest of the test.
func holdMutex(t *testing.T, srv *testserver.Server, name string) *mutex.Mutex {
	t.Helper()
	ctx := dsync.WithOwner(context.Background())
	m := mutex.New(srv.NewBackend(t), name)
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.UnlockContext(ctx) })
	return m
}

// TestRunExclusive starts two dsync run at once on one name: their
// commands never overlap, the second starts after the first ended, and
// the fencing token increases.
func TestRunExclusive(t *testing.T) {
	srv := testserver.Real(t)
	dir := t.TempDir()
	name := testLockName(t)
	// mkdir fails if the other command is inside.
	script := `mkdir "$D/in" || { echo overlap >>"$D/log"; exit 1; }
echo "start $DSYNC_NAME $DSYNC_TOKEN" >>"$D/log"
sleep 0.3
echo "end $DSYNC_TOKEN" >>"$D/log"
rmdir "$D/in"`
	var ps []*dsyncProc
	for range 2 {
		ps = append(ps, startDsync(t, []string{"D=" + dir}, "run", "-redis", srv.Addr(), "-lease", "5s", name, "--", "sh", "-c", script))
	}
	for i, p := range ps {
		if code := p.wait(t); code != 0 {
			t.Errorf("dsync run %d exited %d\nstderr:\n%s", i, code, &p.stderr)
		}
	}
	checkTurns(t, dir, name)
}

// TestRunExitStatus: the command's status is run's, a command killed by a
// signal is reported as a shell would, and a command that cannot run is
// 126 or 127 without the lock being taken.
func TestRunExitStatus(t *testing.T) {
	srv := testserver.Real(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{[]string{"no-such-command-dsync"}, exitNotFound},
		{[]string{filepath.Join(dir, "missing")}, exitNotFound},
		{[]string{notExec}, exitCannotRun},
	} {
		name := testLockName(t)
		args := append([]string{"run", "-redis", srv.Addr(), name, "--"}, c.cmd...)
		p := startDsync(t, nil, args...)
		if code := p.wait(t); code != c.want {
			t.Errorf("dsync run -- %q: exit %d, want %d\nstderr:\n%s", c.cmd, code, c.want, &p.stderr)
		}
		cannot := c.want == exitCannotRun || c.want == exitNotFound
		if cannot && !strings.Contains(p.stderr.String(), "dsync run: ") {
			t.Errorf("dsync run -- %q: no message on stderr", c.cmd)
		}
		st, err := mutex.New(srv.NewBackend(t), name).State(context.Background())
		if err != nil || st.Locked || cannot != (st.Token == 0) {
			t.Errorf("dsync run -- %q: left the lock %+v, %v (taken only if the command could run, and released)", c.cmd, st, err)
		}
	}
}

// TestRunEnvironment: the command sees the lock's name and its token, and
// flags may follow the name, as for every command.
func TestRunEnvironment(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	p := startDsync(t, nil, "run", name, "-redis", srv.Addr(), "-wait", "5s", "sh", "-c", `echo "env $DSYNC_NAME $DSYNC_TOKEN"`)
	got, _ := p.expect(t, "env ")
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, &p.stderr)
	}
	st, err := mutex.New(srv.NewBackend(t), name).State(context.Background())
	if err != nil || st.Locked || got != name+" "+strconv.FormatInt(st.Token, 10) {
		t.Errorf("the command saw %q; the lock is %+v, %v", got, st, err)
	}
}

// TestRunWaitRunsOut: with -wait, a lock held by another owner makes run
// exit with status 124 once the wait is over, without running the command.
func TestRunWaitRunsOut(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	holdMutex(t, srv, name)
	marker := filepath.Join(t.TempDir(), "ran")
	for _, c := range []struct {
		wait     string
		min, max time.Duration
	}{
		{"200ms", 200 * time.Millisecond, 5 * time.Second},
		{"0", 0, 5 * time.Second},
	} {
		start := time.Now()
		p := startDsync(t, nil, "run", "-redis", srv.Addr(), "-wait", c.wait, name, "--", "touch", marker)
		code := p.wait(t)
		took := time.Since(start)
		if code != exitNotAcquired || took < c.min || took > c.max {
			t.Errorf("-wait %s: exit %d after %v, want %d after [%v, %v]\nstderr:\n%s", c.wait, code, took, exitNotAcquired, c.min, c.max, &p.stderr)
		}
		if want := "not acquired"; !strings.Contains(p.stderr.String(), want) {
			t.Errorf("-wait %s: stderr lacks %q: %s", c.wait, want, &p.stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("-wait %s: the command ran", c.wait)
		}
		t.Logf("-wait %s: exit %d after %v", c.wait, code, took.Round(time.Millisecond))
	}
}

// TestRunLockDeleted deletes the lock's key from under a running command:
// the command gets SIGTERM at the next renewal (a third of the lease), and
// run exits 123 saying the lock was lost.
func TestRunLockDeleted(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	const lease = 900 * time.Millisecond
	p := startDsync(t, nil, "run", "-redis", srv.Addr(), "-lease", lease.String(), name, "--",
		"sh", "-c", `trap 'echo TERM; exit 0' TERM; echo "ready $$"; sleep 60 & wait`)
	pid, _ := p.expect(t, "ready ")
	killGroupAtEnd(t, pid)
	key := "dsync:mutex:{" + name + "}"
	start := time.Now()
	if n, err := srv.Do(context.Background(), "DEL", key); err != nil || n != int64(1) {
		t.Fatalf("DEL %s: %v, %v", key, n, err)
	}
	_, at := p.expect(t, "TERM")
	took := at.Sub(start)
	code := p.wait(t)
	t.Logf("DEL to the command's SIGTERM: %v (lease %v, renewed every %v)", took.Round(time.Millisecond), lease, lease/3)
	if bound := lease/3 + 500*time.Millisecond; took > bound {
		t.Errorf("the command got SIGTERM %v after DEL, want within %v", took, bound)
	}
	if code != exitLost || !strings.Contains(p.stderr.String(), "lost mutex") {
		t.Errorf("exit %d, want %d and a message\nstderr:\n%s", code, exitLost, &p.stderr)
	}
}

// TestRunLostKillsAfterGrace: a command that ignores SIGTERM gets SIGKILL
// -grace after it, and so does everything it started.
func TestRunLostKillsAfterGrace(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	const lease, grace = 900 * time.Millisecond, 300 * time.Millisecond
	p := startDsync(t, nil, "run", "-redis", srv.Addr(), "-lease", lease.String(), "-grace", grace.String(), name, "--",
		"sh", "-c", `trap '' TERM; echo "ready $$"; sleep 60`)
	pid, _ := p.expect(t, "ready ")
	killGroupAtEnd(t, pid)
	start := time.Now()
	if _, err := srv.Do(context.Background(), "DEL", "dsync:mutex:{"+name+"}"); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t)
	took := time.Since(start)
	t.Logf("DEL to run's exit: %v (lease %v, grace %v)", took.Round(time.Millisecond), lease, grace)
	if code != exitLost || !strings.Contains(p.stderr.String(), "sending SIGKILL") {
		t.Errorf("exit %d, want %d after SIGKILL\nstderr:\n%s", code, exitLost, &p.stderr)
	}
	if took < grace || took > lease/3+grace+time.Second {
		t.Errorf("run exited %v after DEL, want in [%v, %v]", took, grace, lease/3+grace+time.Second)
	}
	// The group's processes are gone once init has reaped them.
	n, _ := strconv.Atoi(pid)
	waitFor(t, "the command's process group to be gone (sleep outlived the SIGKILL?)", func() bool {
		return errors.Is(syscall.Kill(-n, 0), syscall.ESRCH)
	})
}

// TestRunForwardsSignals: SIGTERM, SIGINT and SIGHUP sent to run reach the
// command, whose status run exits with, and the lock is released.
func TestRunForwardsSignals(t *testing.T) {
	srv := testserver.Real(t)
	for _, c := range []struct {
		sig  syscall.Signal
		trap string
	}{
		{syscall.SIGTERM, "TERM"},
		{syscall.SIGINT, "INT"},
		{syscall.SIGHUP, "HUP"},
	} {
		name := testLockName(t)
		// A signal that reaches the background sleep before it execs is
		// taken by the shell's trap in the forked child and lost: sleep
		// then lives on until SIGKILL, -grace after the command's exit.
		p := startDsync(t, nil, "run", "-redis", srv.Addr(), "-grace", "1s", name, "--",
			"sh", "-c", `trap 'echo got `+c.trap+`; exit 7' `+c.trap+`; echo "ready $$"; sleep 60 & wait`)
		pid, _ := p.expect(t, "ready ")
		killGroupAtEnd(t, pid)
		if err := p.cmd.Process.Signal(c.sig); err != nil {
			t.Fatal(err)
		}
		p.expect(t, "got "+c.trap)
		if code := p.wait(t); code != 7 {
			t.Errorf("%v: exit %d, want the command's 7\nstderr:\n%s", c.sig, code, &p.stderr)
		}
		if ok, err := mutex.New(srv.NewBackend(t), name).IsLocked(context.Background()); err != nil || ok {
			t.Errorf("%v: locked %v, %v after run ended", c.sig, ok, err)
		}
	}
}

// TestRunSignalWhileWaiting: a signal that comes while run waits for the
// lock ends it with 128+N, without running the command.
func TestRunSignalWhileWaiting(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	m := holdMutex(t, srv, name)
	marker := filepath.Join(t.TempDir(), "ran")
	p := startDsync(t, nil, "run", "-redis", srv.Addr(), name, "--", "touch", marker)
	waitFor(t, "run to wait for the lock", func() bool {
		st, err := m.State(context.Background())
		return err == nil && st.Waiters == 1
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 128+int(syscall.SIGTERM) || !strings.Contains(p.stderr.String(), "SIGTERM while waiting") {
		t.Errorf("exit %d, want %d\nstderr:\n%s", code, 128+int(syscall.SIGTERM), &p.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}

// TestRunServerUnreachable: a server that does not answer is status 125
// within the timeout, and the command does not run.
func TestRunServerUnreachable(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	for _, addr := range []string{closedAddr(t), silentServer(t)} {
		start := time.Now()
		p := startDsync(t, nil, "run", "-redis", addr, "-timeout", "500ms", "x", "--", "touch", marker)
		code := p.wait(t)
		if code != exitRunFailed || time.Since(start) > 10*time.Second || !strings.Contains(p.stderr.String(), addr) {
			t.Errorf("-redis %s: exit %d after %v, want %d\nstderr:\n%s", addr, code, time.Since(start), exitRunFailed, &p.stderr)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}

// checkTurns reads the log that two commands run by dsync run NAME wrote
// to dir ("start NAME $DSYNC_TOKEN" on starting, "end $DSYNC_TOKEN" on
// ending): one ran after the other, never overlapping, and the second's
// fencing token is above the first's.
func checkTurns(t *testing.T, dir, name string) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) != 4 {
		t.Fatalf("log:\n%s", log)
	}
	var tokens [2]int64
	for i := range 2 {
		tok := strings.TrimPrefix(lines[2*i], "start "+name+" ")
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || lines[2*i+1] != "end "+tok {
			t.Fatalf("commands overlapped or token missing; log:\n%s", log)
		}
		tokens[i] = n
	}
	if tokens[1] <= tokens[0] || tokens[0] <= 0 {
		t.Errorf("tokens %v do not increase; log:\n%s", tokens, log)
	}
}
