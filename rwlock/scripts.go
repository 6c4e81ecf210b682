package rwlock

import (
	_ "embed"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/script"
)

var (
	//go:embed lua/rw.lua
	rwLua string
	//go:embed lua/read_acquire.lua
	readAcquireLua string
	//go:embed lua/write_acquire.lua
	writeAcquireLua string
	//go:embed lua/read_release.lua
	readReleaseLua string
	//go:embed lua/write_release.lua
	writeReleaseLua string
	//go:embed lua/abandon.lua
	abandonLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/renew_read.lua
	renewReadLua string
	//go:embed lua/renew_write.lua
	renewWriteLua string
	//go:embed lua/token.lua
	tokenLua string

	readAcquireScript  = newScript(readAcquireLua)
	writeAcquireScript = newScript(writeAcquireLua)
	readReleaseScript  = newScript(readReleaseLua)
	writeReleaseScript = newScript(writeReleaseLua)
	abandonScript      = newScript(abandonLua)
	forceScript        = newScript(forceLua)
	inspectScript      = newScript(inspectLua)

	// The renewals take the keys of many holds, not the lock's seven.
	renewReadScript  = newScript(renewReadLua)
	renewWriteScript = script.New(script.Queue, script.Exclusive, renewWriteLua)
	tokenScript      = newScript(tokenLua)
)

// newScript builds a script of the lock on the library parts it uses: the
// write hold's exclusive state and its tokens, the writers' FIFO queue, the
// readers' waiter set, and the lock's own state (rw.lua). A body may start
// with a fast path that needs none of them, ended by the line
// partsMarker: the parts go there, so that a script that returns on its
// fast path spares Redis defining their functions, each a closure made
// on every call.
func newScript(body string) *backend.Script {
	return script.New(script.Queue, script.Waiters, script.Exclusive, rwLua, body)
}
