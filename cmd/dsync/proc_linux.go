package main

import "syscall"

// setParentDeathSignal has the kernel kill the command if run dies
// without stopping it (SIGKILL, the OOM killer): its lock would be free
// for another process as soon as its lease ran out, with the command still
// working.
func setParentDeathSignal(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGKILL
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// adoptOrphans makes run the parent of the processes the command leaves
// behind when their parent dies (the shell's background jobs, once the
// shell has exited), instead of init: run then learns of their deaths
// from wait4 and reaps them itself, and does not depend on init reaping
// them to see the command's process group gone. It affects the whole
// process, which is run's alone.
func adoptOrphans() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
