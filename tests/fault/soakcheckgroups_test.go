package fault

// What the checkers of the read-write lock, the semaphore and the
// multilock catch, and what they let pass: histories written by hand, each
// next to the violation it differs from by one event.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// rwHistory: readers 0 and 1 share the lock (0-100ms, 50-150ms), then
// writer 2 takes it (token 10, 200-300ms) for a fenced read-modify-write.
func rwHistory() []soakEvent {
	return []soakEvent{
		{kind: "racq", client: 0, call: 0, ret: 1 * msec},
		{kind: "renter", client: 0, call: 2 * msec, ret: 3 * msec, ok: true, known: true},
		{kind: "rleave", client: 0, call: 4 * msec, ret: 5 * msec, ok: true, known: true},
		{kind: "racq", client: 1, call: 40 * msec, ret: 50 * msec},
		{kind: "rrel?", client: 0, call: 100 * msec},
		{kind: "rrel", client: 0, call: 100 * msec, ret: 101 * msec, ok: true, known: true},
		{kind: "acq", client: 2, token: 10, call: 60 * msec, ret: 200 * msec},
		{kind: "rrel?", client: 1, call: 150 * msec},
		{kind: "rrel", client: 1, call: 150 * msec, ret: 151 * msec, ok: true, known: true},
		{kind: "read?", client: 2, token: 10, call: 201 * msec},
		{kind: "read", client: 2, token: 10, call: 201 * msec, ret: 202 * msec, ok: true, known: true, value: 0},
		{kind: "write?", client: 2, token: 10, call: 203 * msec, value: 1},
		{kind: "write", client: 2, token: 10, call: 203 * msec, ret: 204 * msec, ok: true, known: true, value: 1},
		{kind: "rel?", client: 2, token: 10, call: 300 * msec},
		{kind: "rel", client: 2, token: 10, call: 300 * msec, ret: 301 * msec, ok: true, known: true},
		{kind: "racq", client: 0, call: 250 * msec, ret: 302 * msec},
		{kind: "rrel?", client: 0, call: 400 * msec},
		{kind: "rrel", client: 0, call: 400 * msec, ret: 401 * msec, ok: true, known: true},
	}
}

func TestSoakCheckerReadWrite(t *testing.T) {
	if r := checkRWGroup(rwHistory(), time.Second, 1, 1); len(r.problems) > 0 {
		t.Fatalf("readers sharing, then a writer: %v", r.problems)
	}
	early := rwHistory()
	early[6].ret = 120 * msec // the writer in while reader 1 holds
	if r := checkRWGroup(early, time.Second, 1, 1); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("a writer in while a reader holds, not caught: %v", r)
	}
	reader := rwHistory()
	reader[15].ret = 250 * msec // reader 0 in while the writer holds
	if r := checkRWGroup(reader, time.Second, 1, 1); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("a reader in while the writer holds, not caught: %v", r)
	}
	leave := rwHistory()
	leave[2].ok = true
	leave = slices.Insert(leave, 3, soakEvent{kind: "rleave", client: 0, call: 6 * msec, ret: 7 * msec, ok: true, known: true})
	if r := checkRWGroup(leave, time.Second, 1, 1); !notLinearizable(r) {
		t.Errorf("a read hold unlocked more times than locked, not caught: %v", r)
	}
	// Reader 1 never unlocks (killed): its hold lasts its lease, and a
	// writer in before it ran out is caught; one after, not.
	killed := func(writerIn int64) []soakEvent {
		h := rwHistory()
		h[7] = soakEvent{kind: "killed", client: 1, call: 140 * msec}
		h[8] = soakEvent{kind: "fail", client: 1, call: 141 * msec, ret: 141 * msec}
		for i := 6; i < 15; i++ {
			if h[i].client == 2 {
				h[i].call += writerIn
				h[i].ret += writerIn
			}
		}
		h[6].call = 60 * msec
		return h
	}
	if r := checkRWGroup(killed(0), time.Second, 1, 1); !notLinearizable(r) {
		t.Errorf("a writer in while a killed reader's hold had not expired, not caught: %v", r)
	}
	if r := checkRWGroup(killed(1000*msec), time.Second, 1, 1); len(r.problems) > 0 {
		t.Errorf("a writer in after a killed reader's hold expired: %v", r.problems)
	}
}

// sem is a semaphore history: holds[i] is client i's acquisition of
// permits [from, until, n].
func sem(holds ...[3]int64) []soakEvent {
	var es []soakEvent
	for c, h := range holds {
		es = append(es, soakEvent{kind: "acq", client: c, call: h[0], ret: h[0], value: h[2]},
			soakEvent{kind: "rel?", client: c, call: h[1], value: h[2]},
			soakEvent{kind: "rel", client: c, call: h[1], ret: h[1] + 1, ok: true, known: true, value: h[2]})
	}
	return es
}

func TestSoakCheckerSemaphorePermits(t *testing.T) {
	const capacity = 3
	ok := sem([3]int64{0, 100 * msec, 2}, [3]int64{10 * msec, 50 * msec, 1}, [3]int64{50 * msec, 90 * msec, 1})
	if r := checkSemaphoreGroup(ok, time.Second, capacity); len(r.problems) > 0 {
		t.Fatalf("3 permits at most: %v", r.problems)
	}
	over := sem([3]int64{0, 100 * msec, 2}, [3]int64{10 * msec, 50 * msec, 1}, [3]int64{40 * msec, 90 * msec, 1})
	if r := checkSemaphoreGroup(over, time.Second, capacity); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("4 permits at once not caught: %v", r)
	}
	// An owner's further acquisition counts: 1 + 2 for client 0, then 1
	// for client 1 while it holds them.
	more := sem([3]int64{0, 100 * msec, 1}, [3]int64{30 * msec, 60 * msec, 1})
	more = slices.Insert(more, 1, soakEvent{kind: "enter", client: 0, call: 10 * msec, ret: 11 * msec, ok: true, known: true, value: 2},
		soakEvent{kind: "leave", client: 0, call: 80 * msec, ret: 81 * msec, ok: true, known: true, value: 2})
	if r := checkSemaphoreGroup(more, time.Second, capacity); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("an owner's 1+2 permits and another's 1, not caught: %v", r)
	}
	failed := slices.Delete(slices.Clone(more), 2, 3) // no leave
	failed[1].ok = false                              // the further acquisition failed: 2 held at most
	if r := checkSemaphoreGroup(failed, time.Second, capacity); len(r.problems) > 0 {
		t.Errorf("a further acquisition that failed: %v", r.problems)
	}
	// Giving back more than was acquired.
	back := sem([3]int64{0, 100 * msec, 2})
	back[2].value = 3
	if r := checkSemaphoreGroup(back, time.Second, capacity); !notLinearizable(r) {
		t.Errorf("3 permits given back of 2, not caught: %v", r)
	}
	// Permits come back when their lease ends: client 0 takes all 3 and
	// is killed; client 1 acquires after the lease, not before.
	expired := func(at int64) []soakEvent {
		return []soakEvent{
			{kind: "acq", client: 0, call: 0, ret: 1 * msec, value: 3},
			{kind: "killed", client: 0, call: 10 * msec},
			{kind: "acq", client: 1, call: 20 * msec, ret: at, value: 1},
			{kind: "rel?", client: 1, call: at + 10*msec, value: 1},
			{kind: "rel", client: 1, call: at + 10*msec, ret: at + 11*msec, ok: true, known: true, value: 1},
		}
	}
	if r := checkSemaphoreGroup(expired(1002*msec), time.Second, capacity); len(r.problems) > 0 {
		t.Errorf("a permit after the killed holder's lease: %v", r.problems)
	}
	if r := checkSemaphoreGroup(expired(900*msec), time.Second, capacity); !notLinearizable(r) {
		t.Errorf("a permit before the killed holder's lease ended, not caught: %v", r)
	}
}

// An eviction of a key that carries holds may end any hold the server had
// in its window, unknown to its holder: client 1 acquiring while client
// 0 believes it holds is no violation if client 0's unlock found its hold
// gone, but is one if the unlock released it (its hold was there all
// along); and tokens must still increase.
func TestSoakCheckerEviction(t *testing.T) {
	evicted := func(relOK bool, token int64) []soakEvent {
		return []soakEvent{
			{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
			{kind: "evicted", client: -1, call: 100 * msec, ret: 300 * msec, value: 1},
			{kind: "acq", client: 1, token: token, call: 150 * msec, ret: 200 * msec},
			{kind: "rel?", client: 1, token: token, call: 250 * msec},
			{kind: "rel", client: 1, token: token, call: 250 * msec, ret: 251 * msec, ok: true, known: true},
			{kind: "rel?", client: 0, token: 10, call: 500 * msec},
			{kind: "rel", client: 0, token: 10, call: 500 * msec, ret: 501 * msec, ok: relOK, known: true},
		}
	}
	for _, g := range []string{"mutex", "watchdog", "multilock"} {
		if r := checkSoakGroup(g, evicted(false, 11), time.Second, 0, 0); len(r.problems) > 0 {
			t.Errorf("%s: a hold ended by an eviction, another acquiring: %v", g, r.problems)
		}
		if r := checkSoakGroup(g, evicted(true, 11), time.Second, 0, 0); r.overlaps == 0 || !notLinearizable(r) {
			t.Errorf("%s: a hold its unlock released, another acquiring meanwhile, not caught: %v", g, r)
		}
		if r := checkSoakGroup(g, evicted(false, 9), time.Second, 0, 0); !notLinearizable(r) {
			t.Errorf("%s: a token going back after an eviction, not caught: %v", g, r)
		}
	}
	// Client 0's hold was evicted before its acquisition returned (its
	// fenced read was refused): never valid, it overlaps nothing, though
	// it returned while client 1 held. Failed before the overlap check
	// asked for the later hold to be valid.
	early := []soakEvent{
		{kind: "evicted", client: -1, call: 0, ret: 300 * msec, value: 1},
		{kind: "acq", client: 0, token: 10, call: 100 * msec, ret: 200 * msec},
		{kind: "acq", client: 1, token: 11, call: 150 * msec, ret: 160 * msec},
		{kind: "read?", client: 1, token: 11, call: 170 * msec},
		{kind: "read", client: 1, token: 11, call: 170 * msec, ret: 171 * msec, ok: true, known: true, value: 0},
		{kind: "read?", client: 0, token: 10, call: 201 * msec},
		{kind: "read", client: 0, token: 10, call: 201 * msec, ret: 202 * msec, ok: false, known: true, value: 11},
		{kind: "rel?", client: 0, token: 10, call: 203 * msec},
		{kind: "rel", client: 0, token: 10, call: 203 * msec, ret: 204 * msec, ok: false, known: true},
		{kind: "rel?", client: 1, token: 11, call: 250 * msec},
		{kind: "rel", client: 1, token: 11, call: 250 * msec, ret: 251 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("fairlock", early, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("a hold evicted before its acquisition returned: %v", r.problems)
	}
	early[8].ok = true // but its unlock released it: it was there all along
	if r := checkSoakGroup("fairlock", early, time.Second, 0, 0); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("a hold released by its unlock, acquired while another held: %v", r)
	}

	// Read holds too.
	rw := rwHistory()
	rw[6].ret = 120 * msec
	rw = append(rw, soakEvent{kind: "evicted", client: -1, call: 110 * msec, ret: 115 * msec, value: 1})
	if r := checkRWGroup(rw, time.Second, 1, 1); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("a writer in while a reader, whose unlock then released its hold, held: %v", r)
	}
	rw[8].ok = false // reader 1's unlock found its hold gone
	if r := checkRWGroup(rw, time.Second, 1, 1); len(r.problems) > 0 {
		t.Errorf("a writer in after an eviction took a reader's hold: %v", r.problems)
	}
	// And permits.
	s := sem([3]int64{0, 500 * msec, 3}, [3]int64{200 * msec, 300 * msec, 1})
	s = append(s, soakEvent{kind: "evicted", client: -1, call: 100 * msec, ret: 150 * msec, value: 1})
	if r := checkSemaphoreGroup(s, time.Second, 3); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("4 permits, the 3 an eviction might have taken released at the end: %v", r)
	}
	s[2].ok = false
	if r := checkSemaphoreGroup(s, time.Second, 3); len(r.problems) > 0 {
		t.Errorf("a permit after an eviction took 3: %v", r.problems)
	}
}

// A multilock's unlock that finds a member lost releases the others and
// reports the loss: the group is free by its return. Here a member was
// evicted and the re-entry took it anew, so the inner unlock released it
// and the outer one found it gone (as in a soak run, seed
// 5926801293892167707): client 1 acquired as the outer unlock ended.
// The group's hold was never gone: an eviction is not sure to have ended
// it, though its unlock found a member gone within its lease. The checker
// took it for sure, and the model passed only because the window opened
// before the acquisition returned, so that it could place the expiry
// before the acquisition as a no-op; with the window opening after, it
// was Illegal.
func TestSoakCheckerMultilockPartialRelease(t *testing.T) {
	for _, from := range []int64{0, 21 * msec} {
		t.Run(fmt.Sprintf("window from %v", time.Duration(from)), func(t *testing.T) {
			multilockPartialRelease(t, from)
		})
	}
}

func multilockPartialRelease(t *testing.T, windowFrom int64) {
	es := []soakEvent{
		{kind: "evicted", client: -1, call: windowFrom, ret: 60 * msec, value: 1},
		{kind: "acq", client: 0, token: 10, call: 10 * msec, ret: 20 * msec},
		{kind: "enter", client: 0, token: 10, call: 25 * msec, ret: 45 * msec, ok: true, known: true},
		{kind: "leave", client: 0, token: 10, call: 70 * msec, ret: 75 * msec, ok: true, known: true},
		{kind: "rel?", client: 0, token: 10, call: 80 * msec},
		{kind: "acq", client: 1, token: 11, call: 15 * msec, ret: 95 * msec},
		{kind: "rel", client: 0, token: 10, call: 80 * msec, ret: 90 * msec, ok: false, known: true},
		{kind: "rel?", client: 1, token: 11, call: 100 * msec},
		{kind: "rel", client: 1, token: 11, call: 100 * msec, ret: 101 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("multilock", es, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("a group partly given back by an unlock that found a member lost: %v", r.problems)
	}
	es[5].ret = 78 * msec // before the outer unlock was sent
	if r := checkSoakGroup("multilock", es, time.Second, 0, 0); !notLinearizable(r) {
		t.Errorf("the group acquired before its holder's outer unlock, not caught: %v", r)
	}
}

// The model's capacity for holds at once is a limit of the checker's,
// reported as such, not a pass.
func TestSoakCheckerModelLimit(t *testing.T) {
	var es []soakEvent
	for c := range maxHolds + 1 {
		es = append(es, soakEvent{kind: "racq", client: c, call: int64(c) * msec, ret: int64(c)*msec + 1})
	}
	r := checkRWGroup(es, time.Second, 0, 0)
	if !slices.ContainsFunc(r.problems, func(p string) bool { return strings.Contains(p, "model") }) {
		t.Errorf("%d read holds at once: %v", maxHolds+1, r.problems)
	}
}
