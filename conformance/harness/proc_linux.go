package harness

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes a server we start die with the test binary, even when
// a test panics or times out before it can stop it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
