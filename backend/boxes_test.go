package backend

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"testing"
)

// collidingKeys returns n distinct strings that b keeps in one slot.
func collidingKeys(t *testing.T, b *boxes, n int) []string {
	t.Helper()
	slot := func(s string) uint64 { return maphash.String(b.seed, s) % boxSlots }
	keys := []string{"{lock}:key"}
	for i := 0; len(keys) < n && i < 1_000_000; i++ {
		if s := fmt.Sprintf("{lock}:key:%d", i); slot(s) == slot(keys[0]) {
			keys = append(keys, s)
		}
	}
	if len(keys) < n {
		t.Fatalf("found %d strings of one slot, want %d", len(keys), n)
	}
	return keys
}

func TestBoxesReturnTheStringAskedFor(t *testing.T) {
	b := newBoxes()
	keys := collidingKeys(t, b, 3)
	for round := range 3 {
		for _, k := range keys {
			if got := b.box(k); got != k {
				t.Fatalf("round %d: box(%q) = %#v", round, k, got)
			}
		}
	}
	// A string of equal content, made apart from the one stored.
	k := keys[2]
	equal := string([]byte(k))
	if got := b.box(equal); got != k {
		t.Fatalf("box of an equal string = %#v", got)
	}
}

func TestBoxesReuseTheBoxOfARepeatedString(t *testing.T) {
	b := newBoxes()
	k := fmt.Sprintf("{lock}:%d", 12345) // not a constant, whose box is static
	b.box(k)
	if n := testing.AllocsPerRun(100, func() { b.box(k) }); n != 0 {
		t.Errorf("boxing a repeated string allocates %v times, want 0", n)
	}
	var l lastInt
	l.box(8000)
	if n := testing.AllocsPerRun(100, func() { l.box(8000) }); n != 0 {
		t.Errorf("boxing a repeated int64 allocates %v times, want 0", n)
	}
	if got := l.box(9000); got != "9000" {
		t.Errorf("lastInt.box(9000) after 8000 = %#v", got)
	}
	// Handles with different leases on one backend take turns: a few
	// values in turn are each boxed once.
	leases := []int64{30000, 10000, 31000, 60000}
	for _, n := range leases {
		l.box(n)
	}
	i := 0
	if n := testing.AllocsPerRun(100, func() { l.box(leases[i%len(leases)]); i++ }); n != 0 {
		t.Errorf("boxing %d int64 values in turn allocates %v times a call, want 0", len(leases), n)
	}
}

func TestBoxesConcurrentUse(t *testing.T) {
	b := newBoxes()
	keys := collidingKeys(t, b, 4)
	var l lastInt
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := keys[(g+i)%len(keys)]
				if got := b.box(k); got != k {
					errs <- fmt.Sprintf("box(%q) = %#v", k, got)
					return
				}
				n := int64(g%2*1000 + i%3)
				if got := l.box(n); got != strconv.FormatInt(n, 10) {
					errs <- fmt.Sprintf("lastInt.box(%d) = %#v", n, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
