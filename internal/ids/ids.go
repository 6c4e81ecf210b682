// Package ids is the random source of dsync's ids (dsync.NewID, and the
// ids of a fresh acquisition, codec.NewHold).
package ids

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"sync"
)

// Read fills b with random bytes from a ChaCha8 stream seeded from
// crypto/rand: as unpredictable and collision-free as crypto/rand for
// 128-bit ids, without a system call per id on the lock path.
func Read(b []byte) {
	g := generators.Get().(*mrand.ChaCha8)
	g.Read(b)
	generators.Put(g)
}

var generators = sync.Pool{New: func() any {
	var seed [32]byte
	rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}}
