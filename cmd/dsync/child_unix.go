//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// forwarded are the signals run passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// A child is the command run runs, in a process group of its own: a
// signal sent to the group reaches everything the command started (the
// programs a shell script runs, say), so that a command stopped because
// the lock was lost does not leave a grandchild behind still working.
// The group outlives the command's own process if what it started does:
// run watches for both ends.
type child struct {
	cmd    *exec.Cmd
	pgid   int           // the group's id: the command's pid
	exited chan struct{} // closed when the command's own process has exited
	err    error         // from Wait; set before exited is closed
	gone   chan struct{} // closed when no process of the group is left, after exited
	// leftovers tells whether processes of the group were left when the
	// command exited; set before exited is closed.
	leftovers bool
}

// startChild starts cmd.
func startChild(cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
	// Output the command leaves to a grandchild that outlives it is not
	// waited for longer than this (only when stdout or stderr is not a
	// file, as in tests).
	cmd.WaitDelay = time.Second
	if err := adoptOrphans(); err != nil {
		return nil, fmt.Errorf("cannot adopt the command's orphans: %w", err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{}), gone: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal is sent when the thread that started
		// the child exits, not the process (go.dev/issue/27505): keep the
		// thread for as long as the child lives.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.pgid = cmd.Process.Pid
		started <- nil
		c.err = cmd.Wait()
		c.reap(syscall.WNOHANG)
		c.leftovers = c.groupAlive()
		close(c.exited)
		c.awaitGroup()
		close(c.gone)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// awaitGroup returns once no process of the command's group is left, not
// even one dead and not yet reaped; the command's own process has been
// reaped by then (Wait). Those of the group that are run's children (on
// Linux, every orphan: see adoptOrphans) are waited for, and reaped, as
// they die (the command itself is not among them: Wait reaped it). Others (on Linux, a process whose parent left the
// group; elsewhere, init's adoptees) have no event that tells of their
// death: kill(-pgid, 0) is polled, at most every 50ms, until it finds
// nobody.
func (c *child) awaitGroup() {
	pause := time.Millisecond
	for {
		c.reap(0)
		if !c.groupAlive() {
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// reap reaps the processes of the group that are run's children and have
// ended, and with options 0 waits for those still running to end, until
// none of the group is run's child. With syscall.WNOHANG it returns when
// none has ended.
func (c *child) reap(options int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-c.pgid, &ws, options, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil, pid == 0: // ECHILD: none of the group is run's child; 0: none ended
			return
		}
	}
}

// groupAlive reports whether a process of the command's group is left,
// dead and not yet reaped included.
func (c *child) groupAlive() bool {
	return !errors.Is(syscall.Kill(-c.pgid, 0), syscall.ESRCH)
}

// signal sends sig to the command's process group. A group that is gone
// is not an error, and gets no signal: its id may belong to another group
// by then.
func (c *child) signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return errors.New("not a signal number")
	}
	select {
	case <-c.gone:
		return nil
	default:
	}
	err := syscall.Kill(-c.pgid, s)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// status returns the command's exit status as a shell reports it: its
// exit code, or 128 plus the number of the signal that killed it.
func (c *child) status() int {
	ps := c.cmd.ProcessState
	if ps == nil {
		return exitRunFailed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalStatus is the status of a process killed by sig, as a shell
// reports it.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitInterrupted
}

// signalName returns the name of sig as kill(1) spells it.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return sig.String()
}

const (
	sigterm = syscall.SIGTERM
	sigkill = syscall.SIGKILL
)
