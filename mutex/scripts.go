package mutex

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

// newScript builds a mutex script on the library parts every mutex script
// may use: an exclusive hold's state and fencing, and the waiters' queue in
// the order of their arrival at the server (script.Queue).
func newScript(body string) *backend.Script {
	return script.New(script.Queue, script.Exclusive, body)
}
