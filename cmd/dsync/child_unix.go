//go:build unix

package main

import (
	"errors"
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
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the command has exited
	err    error         // from Wait; set before exited is closed
}

// startChild starts cmd.
func startChild(cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
	// Output the command leaves to a grandchild that outlives it is not
	// waited for longer than this (only when stdout or stderr is not a
	// file, as in tests).
	cmd.WaitDelay = time.Second
	c := &child{cmd: cmd, exited: make(chan struct{})}
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
		started <- nil
		c.err = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// signal sends sig to the command's process group. A group that is gone
// is not an error.
func (c *child) signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return errors.New("not a signal number")
	}
	err := syscall.Kill(-c.cmd.Process.Pid, s)
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
