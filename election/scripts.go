package election

import (
	_ "embed"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/script"
)

var (
	//go:embed lua/term.lua
	termLua string
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/abandon.lua
	abandonLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/proclaim.lua
	proclaimLua string
	//go:embed lua/announce.lua
	announceLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/token.lua
	tokenLua string

	acquireScript  = newScript(acquireLua)
	releaseScript  = newScript(releaseLua)
	abandonScript  = newScript(abandonLua)
	forceScript    = newScript(forceLua)
	proclaimScript = newScript(proclaimLua)
	announceScript = newScript(announceLua)
	inspectScript  = newScript(inspectLua)
	renewScript    = newScript(renewLua)
	tokenScript    = newScript(tokenLua)
)

// newScript builds an election script on the library parts every one may
// use (an exclusive hold's state and fencing, and a FIFO queue: a term is
// a fair lock's hold) and the election's own (term.lua: values, the
// leader state and what observers are told).
func newScript(body string) *backend.Script {
	return script.New(script.Queue, script.Exclusive, termLua, body)
}
