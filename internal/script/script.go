// Package script builds the primitives' Lua scripts on a small shared
// library (lib.lua): server time, operation ids, and the waiter set that
// targets wake-ups at one waiter.
package script

import (
	_ "embed"

	"github.com/dsyncgo/dsync/backend"
)

//go:embed lib.lua
var lib string

// New returns a script made of the library followed by body.
func New(body string) *backend.Script {
	return backend.NewScript(lib + body)
}
