// Package script builds the primitives' Lua scripts from a small shared
// library: lib.lua (server time, wake-ups, operation ids, errors) always,
// then whichever parts a script needs, then its body.
//
// The parts, each a Lua file here with its own header:
//
//	Fence      fencing tokens: next_token, record_token
//	Waiters    waiter set in the order "longest without an attempt"
//	Queue      FIFO waiter queue by server arrival, apart from expiry
//	Exclusive  the state of an exclusive hold, its hand-off and renewal
//	           (needs Fence)
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
	Fence string
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
// closure per function; the common case of a primitive's hot scripts
// spares that.
const Library = "-- dsync:library\n"

// New returns a script made of the library, then parts, in order, the
// last of which is the script's body. If the body has a Library line, what
// comes before it runs first, before the library.
func New(parts ...string) *backend.Script {
	body := parts[len(parts)-1]
	head, tail, ok := strings.Cut(body, Library)
	if !ok {
		return backend.NewScript(lib + strings.Join(parts, ""))
	}
	return backend.NewScript(head + lib + strings.Join(parts[:len(parts)-1], "") + tail)
}
