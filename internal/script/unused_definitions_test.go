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
