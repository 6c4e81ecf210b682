package script

import (
	"strings"
	"testing"
)

// A library laid out in a way the splitter does not read as written (a
// function on one line, an "end" with a comment or trailing blanks, a
// space before a function's parameters, a comment after a declaration) never costs a script a definition
// its body uses: building the script either keeps g or panics, at init.
// Before, each of these dropped g silently, and the script failed only
// when it called g, as an undefined global.
func TestScriptLibraryLayoutNeverDropsAUsedDefinition(t *testing.T) {
	const g = "local function g()\n  return 2\nend\n"
	for name, library := range map[string]string{
		"one-line function before":   "local function f() return 1 end\n" + g,
		"end with a comment":         "local function f()\n  return 1\nend -- f\n" + g,
		"end with trailing blanks":   "local function f()\n  return 1\nend \n" + g,
		"CRLF end with a comment":    "local function f()\r\n  return 1\r\nend -- f\r\n" + g,
		"space before parameters":    "local function f()\n  return 1\nend\nlocal function g ()\n  return 2\nend\n",
		"declaration with a comment": "local f = 1\nlocal g -- set by the body, 2\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, panicked := shakeOrPanic(library, "return g()\n")
			if !panicked && !strings.Contains(got, "2") {
				t.Errorf("a body calling g: g not defined, and no panic; kept:\n%s", got)
			}
			if !panicked && strings.Contains(got, "1") {
				t.Errorf("a body calling only g: f defined too; kept:\n%s", got)
			}
		})
	}
}

func shakeOrPanic(library, body string) (got string, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return shake(library, body), false
}
