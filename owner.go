package dsync

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"sync"
)

type ownerKey struct{}

// WithOwner returns a copy of ctx that carries a new owner. Acquisitions made
// with the returned context, or any context derived from it, belong to that
// owner and re-enter when nested. Calling WithOwner on a context that
// already has an owner starts a new, unrelated owner.
func WithOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, NewID())
}

// OwnerFrom reports the owner id carried by ctx, if any. Primitives use it to
// decide whether an acquisition re-enters; applications rarely need it,
// except to log who holds what.
func OwnerFrom(ctx context.Context) (id string, ok bool) {
	id, ok = ctx.Value(ownerKey{}).(string)
	return id, ok
}

// NewID returns a random 128-bit identifier as 32 hex digits. dsync uses it
// for owners, waiters and operation ids; it is exported so that backends
// and tests can make ids of the same shape.
func NewID() string {
	g := generators.Get().(*mrand.ChaCha8)
	var b [16]byte
	g.Read(b[:])
	generators.Put(g)
	return hex.EncodeToString(b[:])
}

// generators are ChaCha8 streams seeded from crypto/rand: as unpredictable
// and collision-free as crypto/rand for 128-bit ids, without a system call
// per id on the lock path.
var generators = sync.Pool{New: func() any {
	var seed [32]byte
	rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}}
