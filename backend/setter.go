package backend

import (
	"context"
	"time"
)

// A Setter sets a key that does not exist, with an expiry, in one plain
// command (SET key value NX PX ms), which costs the server less than a
// script. The lock core uses it, where a backend implements it, for the
// first attempt of an acquisition of a primitive that a plain value can
// hold (see package mutex); without it, the primitive's acquire script
// does the same in its fast path. It reports whether it set the key.
//
// Its rules are Eval's: ctx bounds the call, a closed backend returns
// ErrClosed, and the reply is one the server sent for this call.
type Setter interface {
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
}
