package dsync

import (
	"context"
	"encoding/hex"

	"github.com/dsyncgo/dsync/internal/ids"
	"github.com/dsyncgo/dsync/internal/owner"
)

// WithOwner returns a copy of ctx that carries a new owner. Acquisitions made
// with the returned context, or any context derived from it, belong to that
// owner and re-enter when nested. Calling WithOwner on a context that
// already has an owner starts a new, unrelated owner.
func WithOwner(ctx context.Context) context.Context {
	return owner.With(ctx, NewID())
}

// OwnerFrom reports the owner id carried by ctx, if any. Primitives use it to
// decide whether an acquisition re-enters; applications rarely need it,
// except to log who holds what.
func OwnerFrom(ctx context.Context) (id string, ok bool) {
	return owner.From(ctx)
}

// NewID returns a random 128-bit identifier as 32 hex digits. dsync uses it
// for owners, waiters and operation ids; it is exported so that backends
// and tests can make ids of the same shape.
func NewID() string {
	var b [16]byte
	ids.Read(b[:])
	return hex.EncodeToString(b[:])
}
