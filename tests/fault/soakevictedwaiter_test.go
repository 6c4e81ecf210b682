package fault

// An acquisition sent during an eviction window and granted long after it
// closed: the eviction came and went while it waited, and ended nothing of
// its hold.

import (
	"testing"
	"time"
)

// From a nemesis soak run (dsync-soak-multilock-4281699351.log, times
// from its eviction window's start, in µs), cut down to the two holds
// whose history the checker rejected: client 1 took the group as the
// window closed, re-entered it (the re-entry took a second), and its
// outer unlock found a member gone (ErrNotHeld) but gave back the rest;
// client 2 asked for the group in the window and got it (the next token)
// only after client 1's unlock. Client 2's eviction may have come before
// its hold was granted: the checker marked that expiry early, to be placed
// after the acquisition, which could be placed only after client 1's hold
// ended, long after the window closed: Illegal (seen before the fix).
func TestSoakCheckerGrantedAfterEvictionWhileWaiting(t *testing.T) {
	us := int64(time.Microsecond)
	es := []soakEvent{
		{kind: "evicted", client: -1, call: 0, ret: 1414525 * us, value: 1},
		{kind: "acq", client: 1, token: 10, call: 1274164 * us, ret: 1446973 * us},
		{kind: "enter", client: 1, token: 10, call: 1447028 * us, ret: 2477527 * us, ok: true, known: true},
		{kind: "leave", client: 1, token: 10, call: 2480281 * us, ret: 2493532 * us, ok: true, known: true},
		{kind: "rel?", client: 1, token: 10, call: 2495184 * us},
		{kind: "rel", client: 1, token: 10, call: 2495184 * us, ret: 2495408 * us, ok: false, known: true},
		{kind: "acq", client: 2, token: 11, call: 1405490 * us, ret: 3488024 * us},
		{kind: "rel?", client: 2, token: 11, call: 3494556 * us},
		{kind: "rel", client: 2, token: 11, call: 3494556 * us, ret: 3504291 * us, ok: false, known: true},
	}
	if r := checkSoakGroup("multilock", es, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("a group granted after an eviction that came while it waited: %v", r.problems)
	}
	// Still caught: client 2 granted the group while client 1's re-entry
	// found it held (before client 1's lease from the re-entry's call
	// could run out).
	es[6].ret = 2440000 * us
	if r := checkSoakGroup("multilock", es, time.Second, 0, 0); !notLinearizable(r) {
		t.Errorf("the group granted while its holder's re-entry kept it, not caught: %v", r)
	}
}
