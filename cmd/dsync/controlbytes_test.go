package main

import (
	"strings"
	"testing"
)

// TestPrintedNamesCarryNoControlBytes pins a defect of 9f3ece2: list, inspect and force-unlock's
// question print lock names (from the keyspace) and holder ids (from the
// lock key's value) to the terminal as they are. A key written by anyone
// who can write to the server, "dsync:mutex:{x}" = "1 1 0 <owner> id", with
// escape sequences in the owner (any non-space bytes pass load), makes
// 'dsync list' emit them: the operator's terminal title, screen or
// clipboard is the writer's, and force-unlock's question can be redrawn to
// name another lock.
func TestPrintedNamesCarryNoControlBytes(t *testing.T) {
	m := startMini(t)
	owner := "\x1b]0;pwned\x07\x1b[2K\x1b[1Amutex-ok"
	if err := m.Set("dsync:mutex:{x}", "1 1 0 "+owner+" 0123456789abcdef0123456789abcdef "); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"list", "-redis", m.Addr()},
		{"inspect", "-redis", m.Addr(), "x"},
		{"force-unlock", "-redis", m.Addr(), "x"},
	} {
		_, stdout, stderr := runCmd(t, "n\n", args...)
		if strings.ContainsAny(stdout+stderr, "\x1b\x07") {
			t.Errorf("dsync %s printed control bytes from the server: stdout %q stderr %q", args[0], stdout, stderr)
		}
	}
}
