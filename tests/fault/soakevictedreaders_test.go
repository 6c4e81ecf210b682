package fault

// Read holds evicted as they were taken: the rwlock checker must decide
// such a history, not run out of time on it.

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// rwVerdict is porcupine's verdict on the lock history of a read-write
// lock's events (as checkRWGroup builds it, with a 1s lease), within d: a
// test's bound on what the soak's check of it may cost.
func rwVerdict(events []soakEvent, d time.Duration) porcupine.CheckResult {
	ws, rs := buildRWHolds(events, time.Second)
	var full atomic.Bool
	return porcupine.CheckOperationsTimeout(rwModel(&full), append(ws.lockOps(), rs.lockOps()...), d)
}

// evictedReads: client 1 takes n read holds in turn, 10ms apart, in an
// eviction window (from 0 to windowEnd) open as each is taken; its unlock
// finds each gone (ErrNotHeld) well within its lease: the eviction ended
// it. Client 2 then takes the write side, long before the read holds'
// leases would have run out.
func evictedReads(n int, windowEnd int64) []soakEvent {
	es := []soakEvent{{kind: "evicted", client: -1, call: 0, ret: windowEnd, value: 1}}
	at := 10 * msec
	for range n {
		es = append(es,
			soakEvent{kind: "racq", client: 1, call: at, ret: at + 5*msec},
			soakEvent{kind: "rrel?", client: 1, call: at + 6*msec},
			soakEvent{kind: "rrel", client: 1, call: at + 6*msec, ret: at + 8*msec, known: true})
		at += 10 * msec
	}
	return append(es,
		soakEvent{kind: "acq", client: 2, token: 10, call: at, ret: at + 1*msec},
		soakEvent{kind: "rel?", client: 2, token: 10, call: at + 2*msec},
		soakEvent{kind: "rel", client: 2, token: 10, call: at + 2*msec, ret: at + 3*msec, ok: true, known: true})
}

// A nemesis soak run evicted the rwlock's keys for 1.37s (05:02:49.675
// to 51.047 in its dsync-soak-rwlock-*.log) while its readers went on:
// holds taken in the window, found gone at their unlock, some re-entered
// meanwhile; a writer took the lock after it. Porcupine could not decide
// the history in 30s (Unknown): the model let each such hold's expiry,
// sent before the acquisition's reply (the window was open), come before
// the acquisition, a no-op that kept the hold for good, and searched
// every combination of those dead ends. Here are 8 of its holds (times
// from the window's start), whose check took 2.6s for 35 operations (125k
// steps; now 18k), and client 9's run of evicted reads scaled to 24
// holds, whose check grew about 1.7-fold with each hold (7s for 20,
// Unknown within the bound here) and now takes about a step an operation.
func TestSoakCheckerReadHoldsEvictedWhileTaken(t *testing.T) {
	us := int64(time.Microsecond)
	soak := []soakEvent{
		{kind: "evicted", client: -1, call: 0 * us, ret: 1372016 * us, value: 1},
		{kind: "racq", client: 8, call: 90076 * us, ret: 1105866 * us},
		{kind: "racq", client: 9, call: 931350 * us, ret: 935795 * us},
		{kind: "rrel?", client: 9, call: 937456 * us},
		{kind: "rrel", client: 9, call: 937456 * us, ret: 940920 * us, known: true},
		{kind: "racq", client: 9, call: 941955 * us, ret: 948835 * us},
		{kind: "renter", client: 9, call: 948860 * us, ret: 952213 * us, ok: true, known: true},
		{kind: "rleave", client: 9, call: 955992 * us, ret: 959222 * us, known: true},
		{kind: "rrel?", client: 9, call: 959276 * us},
		{kind: "rrel", client: 9, call: 959276 * us, ret: 959298 * us, known: true},
		{kind: "racq", client: 9, call: 967801 * us, ret: 973623 * us},
		{kind: "renter", client: 9, call: 973666 * us, ret: 986948 * us, ok: true, known: true},
		{kind: "rleave", client: 9, call: 992238 * us, ret: 998650 * us, known: true},
		{kind: "rrel?", client: 9, call: 998676 * us},
		{kind: "rrel", client: 9, call: 998676 * us, ret: 998705 * us, known: true},
		{kind: "racq", client: 9, call: 1019609 * us, ret: 1028400 * us},
		{kind: "rrel?", client: 9, call: 1035285 * us},
		{kind: "rrel", client: 9, call: 1035285 * us, ret: 1039485 * us, known: true},
		{kind: "racq", client: 9, call: 1102692 * us, ret: 1116893 * us},
		{kind: "renter", client: 8, call: 1105896 * us, ret: 1109920 * us, ok: true, known: true},
		{kind: "racq", client: 6, call: 1108922 * us, ret: 1112625 * us},
		{kind: "renter", client: 6, call: 1112647 * us, ret: 1121712 * us, ok: true, known: true},
		{kind: "rleave", client: 8, call: 1112761 * us, ret: 1119201 * us, known: true},
		{kind: "renter", client: 9, call: 1116925 * us, ret: 1120452 * us, ok: true, known: true},
		{kind: "rrel?", client: 8, call: 1119222 * us},
		{kind: "rrel", client: 8, call: 1119222 * us, ret: 1119246 * us, known: true},
		{kind: "rleave", client: 9, call: 1124770 * us, ret: 1131205 * us, ok: true, known: true},
		{kind: "rleave", client: 6, call: 1127174 * us, ret: 1133076 * us, known: true},
		{kind: "rrel?", client: 9, call: 1131235 * us},
		{kind: "rrel", client: 9, call: 1131235 * us, ret: 1131279 * us, known: true},
		{kind: "rrel?", client: 6, call: 1133097 * us},
		{kind: "rrel", client: 6, call: 1133097 * us, ret: 1133118 * us, known: true},
		{kind: "acq", client: 7, token: 10, call: 1913060 * us, ret: 1926834 * us},
		{kind: "rel?", client: 7, token: 10, call: 1931269 * us},
		{kind: "rel", client: 7, token: 10, call: 1931269 * us, ret: 1935679 * us, ok: true, known: true},
	}
	if r := checkRWGroup(soak, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("the soak's evicted readers: %v", r.problems)
	}
	const bound = 5 * time.Second
	if res := rwVerdict(soak, bound); res != porcupine.Ok {
		t.Errorf("the soak's evicted readers: %v in %v, want Ok", res, bound)
	}
	if res := rwVerdict(evictedReads(24, 5000*msec), bound); res != porcupine.Ok {
		t.Errorf("24 read holds evicted as they were taken, then a writer: %v in %v, want Ok", res, bound)
	}
	// Still checked, and decided: with the window closed before the last
	// read hold was taken, nothing ended that hold before its lease ran
	// out, and the writer took the lock while it was kept.
	if res := rwVerdict(evictedReads(24, 235*msec), bound); res != porcupine.Illegal {
		t.Errorf("a writer in while a read hold taken after the eviction was kept: %v in %v, want Illegal", res, bound)
	}
}
