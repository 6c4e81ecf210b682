package waitgroup

import (
	_ "embed"

	"github.com/dsyncgo/dsync/internal/script"
)

var (
	//go:embed lua/state.lua
	stateLua string
	//go:embed lua/add.lua
	addLua string
	//go:embed lua/done.lua
	doneLua string
	//go:embed lua/wait.lua
	waitLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/renew.lua
	renewLua string

	addScript     = script.New(stateLua, addLua)
	doneScript    = script.New(stateLua, doneLua)
	waitScript    = script.New(stateLua, waitLua)
	inspectScript = script.New(stateLua, inspectLua)
	renewScript   = script.New(renewLua)
)
