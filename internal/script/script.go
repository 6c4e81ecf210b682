// Package script builds the primitives' Lua scripts from a small shared
// library: lib.lua (server time, operation ids, errors), fence.lua
// (fencing tokens) and codec.lua (the argument header, the waiter entry,
// the grant, the replies and the exclusive hold's state) always, then
// whichever parts a script needs, then its body.
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
	"strings"

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
const Library = "-- dsync:library\n"

// MaxExact is the greatest integer that a script's numbers (doubles)
// count exactly, 2^53 - 1: counts a script adds up are kept within it.
const MaxExact = 1<<53 - 1

// New returns a script made of the library, then parts, in order, the
// last of which is the script's body. If the body has a Library line, what
// comes before it runs first, before the library.
func New(parts ...string) *backend.Script {
	body := parts[len(parts)-1]
	head, tail, ok := strings.Cut(body, Library)
	if !ok {
		head, tail = "", body
	}
	return backend.NewScript(head + lib + fence + codec + strings.Join(parts[:len(parts)-1], "") + tail)
}
