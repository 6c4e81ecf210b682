package backend

import (
	"hash/maphash"
	"strconv"
	"sync/atomic"
)

// boxSlots is how many strings a boxes keeps: enough for the keys of a few
// hundred handles in use through one backend value.
const boxSlots = 1024

// boxes is a Pipeline's cache of the keys of its calls as interface
// values. A command line is a []any, and a string stored in an interface
// costs an allocation; a handle sends the same keys on every call, so the
// Pipeline boxes each once and reuses the box.
//
// It is a direct-mapped table, indexed by a hash of the string's content:
// a slot holds the box of the last string stored there, which a lookup
// uses only if its content equals the string asked for (cheap when it is
// the same string: the comparison sees the same data first). It can
// therefore never return another key, whatever the callers do with their
// slices, and it holds at most boxSlots strings, whose handles may be long
// gone: the next string hashed to a slot replaces them. A miss costs the
// allocation it would have cost without the cache. Safe for concurrent
// use.
type boxes struct {
	seed  maphash.Seed
	slots [boxSlots]atomic.Value // each a string boxed once, or nil
}

func newBoxes() *boxes { return &boxes{seed: maphash.MakeSeed()} }

// box returns s as an interface value.
func (b *boxes) box(s string) any {
	slot := &b.slots[maphash.String(b.seed, s)%boxSlots]
	if v := slot.Load(); v != nil && v.(string) == s {
		return v
	}
	var v any = s
	slot.Store(v)
	return v
}

// lastInt is the decimal string of an int64, boxed, remembered for the
// next call that sends the same value, such as the PX of SET NX, which one
// handle sends with the same lease every time: an adapter that sends
// strings (rueidis's) would format an integer on every call. Safe for
// concurrent use.
type lastInt struct{ v atomic.Pointer[boxedInt] }

type boxedInt struct {
	n   int64
	arg any // n in decimal
}

func (l *lastInt) box(n int64) any {
	if b := l.v.Load(); b != nil && b.n == n {
		return b.arg
	}
	b := &boxedInt{n: n, arg: strconv.FormatInt(n, 10)}
	l.v.Store(b)
	return b.arg
}
