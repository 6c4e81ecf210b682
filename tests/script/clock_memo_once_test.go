package script_test

import (
	"strings"
	"testing"

	"github.com/dsyncgo/dsync/internal/script"
)

// Every built script that reads the clock declares its memo (clock_ms,
// clock_us) once, before now, and the seed memo (seeded) once, before
// next_token: a second declaration, in a later part of a body in parts,
// would reset the memo mid-call (a second TIME, a repeated seed), which
// the check of global reads cannot see (the names are locals either way).
func TestEveryScriptDeclaresTheClockMemoOnce(t *testing.T) {
	checks := []struct{ memo, user string }{
		{"local clock_ms, clock_us\n", "local function now("},
		{"local seeded\n", "local function next_token("},
	}
	for _, s := range script.Built() {
		src := s.Source()
		first, _, _ := strings.Cut(strings.TrimLeft(src, "\n"), "\n")
		for _, c := range checks {
			n, u := strings.Count(src, c.memo), strings.Count(src, c.user)
			if n > 1 || u > 1 {
				t.Errorf("script %s (%q): %q declared %d times, %q %d times; want once", s.Hash()[:8], first, c.memo, n, c.user, u)
			}
			if u == 1 && (n != 1 || strings.Index(src, c.memo) > strings.Index(src, c.user)) {
				t.Errorf("script %s (%q): %q without %q before it", s.Hash()[:8], first, c.user, c.memo)
			}
		}
	}
}
