package fairlock

import (
	_ "embed"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/script"
)

var (
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/abandon.lua
	abandonLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/renew.lua
	renewLua string

	acquireScript = newScript(acquireLua)
	releaseScript = newScript(releaseLua)
	abandonScript = newScript(abandonLua)
	forceScript   = newScript(forceLua)
	inspectScript = newScript(inspectLua)
	renewScript   = newScript(renewLua)
)

// newScript builds a fair lock script on the library parts every one may
// use: an exclusive hold's state and its tokens, and a FIFO queue. A body
// may start with a fast path that needs none of them, ended by the line
// partsMarker: the parts go there, so that a script that returns on its
// fast path spares Redis defining their functions, each a closure made
// on every call.
func newScript(body string) *backend.Script {
	return script.New(script.Queue, script.Exclusive, body)
}
