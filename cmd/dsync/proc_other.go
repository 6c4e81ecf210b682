//go:build unix && !linux

package main

import "syscall"

// setParentDeathSignal does nothing: only Linux has a parent-death signal.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// adoptOrphans does nothing: only Linux has child subreapers. The
// command's orphans are init's, and run sees them gone once init reaped
// them.
func adoptOrphans() error { return nil }
