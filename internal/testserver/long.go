package testserver

import "testing"

// Long marks t as one of the long suites: the soak, the eviction cases,
// Cluster and Sentinel runs, tests that wait out minutes of fake time or
// seconds of a busy pool. Under -short (the README's quick test command)
// it skips t, saying so; the full command, which CI runs, runs it. what
// says in a few words what makes t long.
func Long(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("a long suite (%s): skipped under -short; the full test command runs it (README, Tests)", what)
	}
}
