package main

import "syscall"

// setParentDeathSignal has the kernel kill the command if run dies
// without stopping it (SIGKILL, the OOM killer): its lock would be free
// for another process as soon as its lease ran out, with the command still
// working.
func setParentDeathSignal(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGKILL
}
