package election

import "time"

// SetCallTimeout sets the bound of each call an observer makes (see
// callTimeout) until the returned function restores it. Observers started
// meanwhile keep it: set it before any observer starts.
func SetCallTimeout(d time.Duration) (restore func()) {
	was := callTimeout
	callTimeout = d
	return func() { callTimeout = was }
}

// ReadScript is the script of the election's reads.
var ReadScript = inspectScript
