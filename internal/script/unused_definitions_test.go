package script

import (
	"strings"
	"testing"
)

// A script defines what its body uses, directly or through other
// definitions, each whole with the comments before it, in the library's
// order; nothing else.
func TestScriptDefinesOnlyWhatItUses(t *testing.T) {
	const library = `-- a's doc
local function a()
  return 1
end

local k, m = 2, 3
-- b's doc
local function b()
-- a comment at column 0 inside
  local function inner()
    return a() + k
  end
  return inner()
end
-- c is not used
local function c()
  return 3
end
`
	got := shake(library, "return b()\n")
	want := `-- a's doc
local function a()
  return 1
end

local k, m = 2, 3
-- b's doc
local function b()
-- a comment at column 0 inside
  local function inner()
    return a() + k
  end
  return inner()
end
`
	if got != want {
		t.Errorf("shake kept:\n%s\nwant:\n%s", got, want)
	}
	if got := shake(library, "return 0\n"); got != "" {
		t.Errorf("a body that uses nothing kept:\n%s", got)
	}
}

// Kept whole, the library is itself: no line is lost or moved.
func TestScriptLibraryKeptWhole(t *testing.T) {
	library := lib + fence + codec + Queue + Waiters + Exclusive
	if got := shake(library, strings.Join(keys(words(library)), " ")); got != strings.TrimRight(library, "\n")+"\n" {
		t.Errorf("the library kept whole differs from itself (%d bytes against %d)", len(got), len(library))
	}
	got := shake(library, "local a = header()\nwake(a.channel, ARGV[1])\n")
	for _, name := range []string{"header", "wake"} {
		if !strings.Contains(got, "local function "+name+"(") {
			t.Errorf("a body calling %s: not defined", name)
		}
	}
	if strings.Contains(got, "local function enqueue(") {
		t.Error("a body that queues nothing defines enqueue")
	}
}

// A statement of the library that is not a definition cannot be placed:
// building the script panics, at init, rather than dropping it.
func TestScriptLibraryStatementPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	shake("redis.call('PING')\n", "return 0\n")
}

func keys(m map[string]bool) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	return s
}

// A body in parts (Library lines) defines, at each, what the part after it
// uses that no part before defined, with whatever that uses.
func TestScriptLibraryInParts(t *testing.T) {
	library := `local function a()
  return 1
end
local function b()
  return a() + 1
end
local function c()
  return 3
end
local function d()
  return 4
end
`
	defined := map[string]bool{}
	if got, want := shakeRest(library, "return a()\n", defined), "local function a()\n  return 1\nend\n"; got != want {
		t.Errorf("first part kept:\n%s\nwant:\n%s", got, want)
	}
	want := "local function b()\n  return a() + 1\nend\nlocal function c()\n  return 3\nend\n"
	if got := shakeRest(library, "return b() + c()\n", defined); got != want {
		t.Errorf("second part kept:\n%s\nwant:\n%s", got, want)
	}
	if got := shakeRest(library, "return a() + b()\n", defined); got != "" {
		t.Errorf("a part using only what was defined kept:\n%s", got)
	}
}
