// Package script builds the primitives' Lua scripts from a small shared
// library: lib.lua (server time, operation ids, errors), fence.lua
// (fencing tokens) and codec.lua (the argument header, the waiter entry,
// the grant, the replies and the exclusive hold's state) always, then
// whichever parts a script needs, then its body. Of the library, a script
// defines only what its body uses (see shake): each definition costs
// every call of the script.
//
// The parts, each a Lua file here with its own header:
//
//	Queue      FIFO waiter queue by server arrival, apart from expiry
//	Waiters    waiter set in the order "longest without an attempt"
//	Exclusive  what an exclusive hold does: take, re-enter, pass on,
//	           renew, keep the waiters' turn (needs Queue)
package script

import (
	_ "embed"
	"slices"
	"strings"
	"sync"

	"github.com/dsyncgo/dsync/backend"
)

var (
	//go:embed lib.lua
	lib string
	//go:embed fence.lua
	fence string
	//go:embed codec.lua
	codec string

	//go:embed waiters.lua
	Waiters string
	//go:embed queue.lua
	Queue string
	//go:embed exclusive.lua
	Exclusive string
)

// Library is the line of a script's body before which the script runs
// without the library: its fast path, which returns when it handles the
// call. Defining the library's functions costs every call that runs it a
// closure per function, about as much as the script call itself (1.7µs
// against 1.7µs for a script that returns at once, on redis 7.0); the
// common case of a primitive's hot scripts spares that. A fast path reads
// the argument header (codec.lua) by position and never spells out a
// format.
//
// A body may have several Library lines, each at the top level of the
// script: at each, the script defines what the code after it, up to the
// next one, uses that no line before defined. A fast path that needs part
// of the library then defines that part only, and the rest after it.
const Library = "-- dsync:library\n"

// MaxExact is the greatest integer that a script's numbers (doubles)
// count exactly, 2^53 - 1: counts a script adds up are kept within it.
const MaxExact = 1<<53 - 1

// New returns a script made of the library, then parts, in order, the
// last of which is the script's body. If the body has a Library line, what
// comes before it runs first, before the library; at each Library line
// the script defines the library's part that the code after it uses.
func New(parts ...string) *backend.Script {
	body := parts[len(parts)-1]
	library := lib + fence + codec + strings.Join(parts[:len(parts)-1], "")
	segments := strings.Split(body, Library)
	if len(segments) == 1 {
		segments = []string{"", body}
	}
	checkParts(library, segments)
	var src strings.Builder
	src.WriteString(segments[0])
	defined := make(map[string]bool)
	for _, seg := range segments[1:] {
		src.WriteString(shakeRest(library, seg, defined))
		src.WriteString(seg)
	}
	s := backend.NewScript(src.String())
	builtMu.Lock()
	built = append(built, s)
	builtMu.Unlock()
	return s
}

// checkParts panics, at init, where the parts of a body (its text before,
// between and after its Library lines) would have a name read as another
// definition than the one it names, which the check of the names a script
// reads (see Built) does not find: a local at the top level of a part that
// a Library line follows, named as a definition of the library, is what
// the definitions made after it read instead, if the library's was made
// before, and the library's, made after it, is what the parts after it
// read instead, if not; and where the library defines a name twice, a
// part after the first may need the definition that a part before it did
// not, and find that part's.
func checkParts(library string, segments []string) {
	defs := definitions(library)
	names := map[string]int{}
	for _, d := range defs {
		for _, n := range d.names {
			names[n]++
			if names[n] > 1 && len(segments) > 2 {
				panic("script: a body with several Library lines, over a library that defines " + n + " twice")
			}
		}
	}
	for _, seg := range segments[:len(segments)-1] {
		for _, line := range strings.SplitAfter(seg, "\n") {
			rest, ok := strings.CutPrefix(line, "local ")
			if !ok {
				continue
			}
			locals, _ := declared(rest)
			for _, n := range locals {
				if names[n] > 0 {
					panic("script: a top-level local of a body, before a Library line, named as a definition of the library: " + line)
				}
			}
		}
	}
}

var (
	builtMu sync.Mutex
	built   []*backend.Script // see Built
)

// Built returns every script New has made: those of the packages linked
// in, made at their init. A script's library is shaken by its names, not
// by Lua's scopes (see shake), so a test (tests/script) compiles each on
// a server and checks that it reads no name the server does not define:
// a definition dropped that the script calls would fail only when the
// call runs, perhaps on a rare path.
func Built() []*backend.Script {
	builtMu.Lock()
	defer builtMu.Unlock()
	return append([]*backend.Script(nil), built...)
}

// shake returns the definitions of library, in order, that body uses,
// directly or through other definitions. Every definition costs each call
// of a script that makes it (a closure per function, see Library), so a
// script defines only what it may run. A definition is a top-level
// statement of the library: "local function name(" up to its "end", at
// column 0, or "local a, b = ..." on one line; the comments before it go
// with it. A definition met where a function has not ended (a function on
// one line) panics, at init, rather than go unseen with that function.
// Whatever a definition or the body names, as a word anywhere, counts as
// used, so that what is kept is never short.
func shake(library, body string) string { return shakeRest(library, body, map[string]bool{}) }

// shakeRest is shake for a part of a body, after definitions made for the
// parts before it: it leaves out what defined names (with whatever those
// use, made with them) and adds the names of what it keeps.
func shakeRest(library, body string, defined map[string]bool) string {
	defs := definitions(library)
	used := words(body)
	keep := make([]bool, len(defs))
	// Definitions precede their uses: one pass from the end collects
	// every definition used, and whatever those use, but those defined
	// already (with whatever they use).
	for i := len(defs) - 1; i >= 0; i-- {
		if slices.ContainsFunc(defs[i].names, func(n string) bool { return defined[n] }) {
			continue
		}
		for _, n := range defs[i].names {
			if used[n] {
				keep[i] = true
			}
		}
		if keep[i] {
			for w := range words(defs[i].text) {
				used[w] = true
			}
		}
	}
	var b strings.Builder
	for i, d := range defs {
		if keep[i] {
			b.WriteString(d.text)
			for _, n := range d.names {
				defined[n] = true
			}
		}
	}
	return b.String()
}

// def is a definition of the library (see shake): its text, with the
// comments before it, and the names it defines.
type def struct {
	text  string
	names []string
}

// definitions returns the definitions of library, in order (see shake).
func definitions(library string) []def {
	var defs []def
	var pending strings.Builder // comments since the last definition
	inside := false             // in a function's body, until its "end"
	for _, line := range strings.SplitAfter(library, "\n") {
		if inside {
			if strings.HasPrefix(line, "local ") {
				// A definition's first line cannot be in a function's
				// body: the function ended on a line not read as its end
				// (a function on one line). Read on, the definition would
				// go with the function, and be dropped with it.
				panic("script: a definition of the library starts before the last one's end, alone on a line at column 0: " + line)
			}
			defs[len(defs)-1].text += line
			inside = !isEnd(line)
			continue
		}
		rest, ok := strings.CutPrefix(line, "local ")
		switch {
		case ok:
			d := def{text: pending.String() + line}
			pending.Reset()
			var fn bool
			d.names, fn = declared(rest)
			if fn && d.names == nil {
				panic("script: a function of the library without its parameters on its first line: " + line)
			}
			inside = fn
			defs = append(defs, d)
		case strings.HasPrefix(line, "--") || strings.TrimSpace(line) == "":
			pending.WriteString(line)
		default:
			panic("script: a top-level statement of the library is not a definition: " + line)
		}
	}
	if inside {
		panic("script: the library's last function has no end")
	}
	return defs
}

// declared returns the names that a line "local " + rest declares, and
// whether it begins a function ("local function name(", without names if
// its parameters are not on the line).
func declared(rest string) (names []string, fn bool) {
	if f, ok := strings.CutPrefix(rest, "function "); ok {
		name, _, ok := strings.Cut(f, "(")
		if !ok {
			return nil, true
		}
		return []string{strings.TrimSpace(name)}, true
	}
	lhs, _, _ := strings.Cut(rest, "--")
	lhs, _, _ = strings.Cut(lhs, "=")
	for _, n := range strings.Split(lhs, ",") {
		names = append(names, strings.TrimSpace(n))
	}
	return names, false
}

// isEnd reports whether line ends a top-level function: "end" at column 0,
// alone but for blanks or a comment.
func isEnd(line string) bool {
	rest, ok := strings.CutPrefix(line, "end")
	rest = strings.TrimSpace(rest)
	return ok && (rest == "" || strings.HasPrefix(rest, "--"))
}

// words returns the set of Lua names in src.
func words(src string) map[string]bool {
	w := map[string]bool{}
	start := -1
	for i := 0; i <= len(src); i++ {
		c := byte(0)
		if i < len(src) {
			c = src[i]
		}
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || start >= 0 && '0' <= c && c <= '9' {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			w[src[start:i]] = true
			start = -1
		}
	}
	return w
}
