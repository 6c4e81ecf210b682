package mutex

import (
	_ "embed"

	"github.com/dsyncgo/dsync/internal/script"
)

var (
	//go:embed lua/state.lua
	stateLua string
	//go:embed lua/handoff.lua
	handoffLua string
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

	acquireScript = script.New(stateLua + acquireLua)
	releaseScript = script.New(stateLua + handoffLua + releaseLua)
	abandonScript = script.New(stateLua + handoffLua + abandonLua)
	forceScript   = script.New(stateLua + handoffLua + forceLua)
	inspectScript = script.New(stateLua + inspectLua)
	renewScript   = script.New(stateLua + renewLua)
)
