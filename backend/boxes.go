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

// lastInt keeps the decimal strings of the last few int64 values it
// boxed, for the next calls that send the same values, such as the PX of
// SET NX: the handles of one backend send their leases every time, and an
// adapter that sends strings (rueidis's) would format an integer on every
// call. It keeps intSlots values, replaced in turn, so that handles with
// a few different leases on one backend do not take each other's place at
// every call. Safe for concurrent use.
type lastInt struct {
	slots [intSlots]atomic.Pointer[boxedInt]
	next  atomic.Uint32 // the slot the next new value takes
}

// intSlots is how many values a lastInt keeps.
const intSlots = 4

type boxedInt struct {
	n   int64
	arg any // n in decimal
}

func (l *lastInt) box(n int64) any {
	for i := range l.slots {
		if b := l.slots[i].Load(); b != nil && b.n == n {
			return b.arg
		}
	}
	b := &boxedInt{n: n, arg: strconv.FormatInt(n, 10)}
	l.slots[l.next.Add(1)%intSlots].Store(b)
	return b.arg
}
