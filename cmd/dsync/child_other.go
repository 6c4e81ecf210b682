//go:build !unix

package main

import (
	"errors"
	"os"
	"os/exec"
)

// run needs process groups and signals: on other systems it refuses to
// start a command.

var forwarded = []os.Signal{os.Interrupt}

type child struct {
	exited chan struct{}
	gone   chan struct{}

	leftovers bool
}

var errNoUnix = errors.New("dsync run needs a Unix system")

func startChild(*exec.Cmd) (*child, error) { return nil, errNoUnix }

func (c *child) signal(os.Signal) error { return errNoUnix }

func (c *child) status() int { return exitRunFailed }

func (c *child) groupAlive() bool { return false }

func signalStatus(os.Signal) int { return exitInterrupted }

func signalName(sig os.Signal) string { return sig.String() }

var (
	sigterm os.Signal = os.Kill
	sigkill os.Signal = os.Kill
)
