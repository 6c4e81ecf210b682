package fault

// The soak's checkers: what each catches, and cases found by an
// adversarial review: histories a correct lock can produce that the checker
// called violations, and violations it let through (each failed before its
// fix).

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The soak's checker catches what it looks for: two clients holding at
// once, an update lost, a token that goes back.
func TestSoakCheckerCatches(t *testing.T) {
	const lease = time.Second
	ms := int64(time.Millisecond)
	// Client 0 holds [0, 100ms], client 1 [200, 300ms]: fine.
	good := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * ms},
		{kind: "read", client: 0, token: 10, call: 2 * ms, ret: 3 * ms, ok: true, known: true, value: 0},
		{kind: "write", client: 0, token: 10, call: 4 * ms, ret: 5 * ms, ok: true, known: true, value: 1},
		{kind: "rel", client: 0, token: 10, call: 100 * ms, ret: 101 * ms, ok: true, known: true},
		{kind: "acq", client: 1, token: 11, call: 50 * ms, ret: 200 * ms},
		{kind: "read", client: 1, token: 11, call: 202 * ms, ret: 203 * ms, ok: true, known: true, value: 1},
		{kind: "write", client: 1, token: 11, call: 204 * ms, ret: 205 * ms, ok: true, known: true, value: 2},
		{kind: "rel", client: 1, token: 11, call: 300 * ms, ret: 301 * ms, ok: true, known: true},
	}
	if r := checkSoakGroup("good", good, lease, 2, 2); len(r.problems) > 0 {
		t.Fatalf("a correct history: %v", r.problems)
	}
	overlap := slices.Clone(good)
	overlap[4].ret = 90 * ms // client 1 acquired while client 0 held
	if r := checkSoakGroup("overlap", overlap, lease, 2, 2); r.overlaps == 0 || len(r.problems) < 2 {
		t.Errorf("two holders at once not caught: %v", r)
	}
	lostUpdate := slices.Clone(good)
	lostUpdate[5].value, lostUpdate[6].value = 0, 1 // client 1 read a stale value
	if r := checkSoakGroup("lost", lostUpdate, lease, 1, 2); len(r.problems) < 2 {
		t.Errorf("a lost update not caught: %v", r)
	}
	backwards := slices.Clone(good)
	backwards[4].token = 9
	for i := 5; i < 8; i++ {
		backwards[i].token = 9
	}
	if r := checkSoakGroup("backwards", backwards, lease, 2, 2); len(r.problems) == 0 {
		t.Errorf("a token going back not caught: %v", r)
	}

	// A write under way when its client is killed (the parent notes the
	// kill before the write's reply, which never comes) may have been
	// applied: the next holder reading its value is no violation.
	killedWriting := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * ms},
		{kind: "read?", client: 0, token: 10, call: 2 * ms},
		{kind: "read", client: 0, token: 10, call: 2 * ms, ret: 3 * ms, ok: true, known: true, value: 0},
		{kind: "write?", client: 0, token: 10, call: 4 * ms, value: 1},
		{kind: "killed", client: 0, call: 5 * ms},
		{kind: "acq", client: 1, token: 11, call: 50 * ms, ret: 1200 * ms},
		{kind: "read", client: 1, token: 11, call: 1202 * ms, ret: 1203 * ms, ok: true, known: true, value: 1},
		{kind: "write", client: 1, token: 11, call: 1204 * ms, ret: 1205 * ms, ok: true, known: true, value: 2},
		{kind: "rel", client: 1, token: 11, call: 1300 * ms, ret: 1301 * ms, ok: true, known: true},
	}
	if r := checkSoakGroup("killed-writing", killedWriting, lease, 2, 2); len(r.problems) > 0 {
		t.Errorf("a write applied by a client killed before its reply: %v", r.problems)
	}
	paused := slices.Insert(slices.Clone(good), 2, soakEvent{kind: "paused", client: 0, call: 3 * ms})
	paused = slices.Insert(paused, 2, soakEvent{kind: "read?", client: 0, token: 10, call: 2 * ms})
	if r := checkSoakGroup("paused-reading", paused, lease, 2, 2); len(r.problems) > 0 {
		t.Errorf("a read under way when its client was paused: %v", r.problems)
	}

	// Watchdog holds: valid until Done closes (lost), the client is
	// killed, or a lease after it is paused. Client 0 holds from 1ms and
	// never unlocks; client 1 acquires at 2s.
	wd := func(extra ...soakEvent) []soakEvent {
		es := append([]soakEvent{{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * ms}}, extra...)
		return append(es, []soakEvent{
			{kind: "acq", client: 1, token: 11, call: 1500 * ms, ret: 2000 * ms},
			{kind: "rel?", client: 1, token: 11, call: 2100 * ms},
			{kind: "rel", client: 1, token: 11, call: 2100 * ms, ret: 2101 * ms, ok: true, known: true},
		}...)
	}
	if r := checkSoakGroup("watchdog", wd(), lease, 0, 0); r.overlaps == 0 {
		t.Errorf("a renewed hold never lost, never released, overlapping another not caught: %v", r)
	}
	for _, stop := range []soakEvent{
		{kind: "lost", client: 0, token: 10, call: 1900 * ms},
		{kind: "killed", client: 0, call: 1000 * ms},
		{kind: "paused", client: 0, call: 500 * ms},
	} {
		if r := checkSoakGroup("watchdog", wd(stop), lease, 0, 0); r.overlaps != 0 || slices.ContainsFunc(r.problems, func(p string) bool { return strings.Contains(p, "linearizable") }) {
			t.Errorf("watchdog hold ended by %q: %v", stop.kind, r.problems)
		}
	}
	renewedPaused := wd(soakEvent{kind: "renewed", client: 0, call: 1400 * ms}, soakEvent{kind: "paused", client: 0, call: 1500 * ms})
	if r := checkSoakGroup("watchdog", renewedPaused, lease, 0, 0); r.overlaps == 0 {
		t.Errorf("a client renewed at 1.4s and paused at 1.5s, another acquiring at 2s, not caught: %v", r)
	}
	notRenewed := wd(soakEvent{kind: "renewed", client: 0, call: 900 * ms}, soakEvent{kind: "paused", client: 0, call: 1500 * ms})
	if r := checkSoakGroup("watchdog", notRenewed, lease, 0, 0); r.overlaps != 0 {
		t.Errorf("a client last renewed at 0.9s, paused at 1.5s, another acquiring at 2s: %v", r.problems)
	}

	// Semaphore of capacity 2: three clients holding at once is caught,
	// two is not, nor a release and an acquisition at the same instant.
	sem := func(holds ...[2]int64) []soakEvent {
		var es []soakEvent
		for c, h := range holds {
			es = append(es, soakEvent{kind: "acq", client: c, call: h[0], ret: h[0], value: 1},
				soakEvent{kind: "rel?", client: c, call: h[1], value: 1},
				soakEvent{kind: "rel", client: c, call: h[1], ret: h[1] + 1, ok: true, known: true, value: 1})
		}
		return es
	}
	if r := checkSemaphoreGroup(sem([2]int64{0, 100 * ms}, [2]int64{10 * ms, 50 * ms}, [2]int64{50 * ms, 90 * ms}), lease, 2); r.overlaps != 0 {
		t.Errorf("two permits at once reported over capacity: %v", r)
	}
	if r := checkSemaphoreGroup(sem([2]int64{0, 100 * ms}, [2]int64{10 * ms, 50 * ms}, [2]int64{40 * ms, 90 * ms}), lease, 2); r.overlaps == 0 {
		t.Errorf("three permits at once not caught: %v", r)
	}
}

const msec = int64(time.Millisecond)

func notLinearizable(r soakReport) bool {
	return slices.ContainsFunc(r.problems, func(p string) bool { return strings.Contains(p, "linearizable") })
}

// Token() fails when the hold was lost locally (the client was stopped,
// or starved, for more than the lease between LockContext and Token): the
// client reports token 0, which is an unknown token, not a token going back.
func TestSoakCheckerTokenUnknown(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "read?", client: 0, token: 10, call: 2 * msec},
		{kind: "read", client: 0, token: 10, call: 2 * msec, ret: 3 * msec, ok: true, known: true, value: 0},
		{kind: "write?", client: 0, token: 10, call: 4 * msec, value: 1},
		{kind: "write", client: 0, token: 10, call: 4 * msec, ret: 5 * msec, ok: true, known: true, value: 1},
		{kind: "rel?", client: 0, token: 10, call: 100 * msec},
		{kind: "rel", client: 0, token: 10, call: 100 * msec, ret: 101 * msec, ok: true, known: true},
		// client 1 acquires (token 11 on the server), is paused before Token()
		{kind: "paused", client: 1, call: 201 * msec},
		{kind: "acq", client: 1, token: 0, call: 150 * msec, ret: 1500 * msec},
		{kind: "read?", client: 1, token: 0, call: 1501 * msec},
		{kind: "read", client: 1, token: 0, call: 1501 * msec, ret: 1502 * msec, ok: false, known: true, value: 10},
		{kind: "rel?", client: 1, token: 0, call: 1503 * msec},
		{kind: "rel", client: 1, token: 0, call: 1503 * msec, ret: 1504 * msec, ok: false, known: true},
	}
	if r := checkSoakGroup("mutex", es, time.Second, 1, 1); len(r.problems) > 0 {
		t.Errorf("a hold whose Token() failed: %v", r.problems)
	}
}

// The parent takes a kill's time before it signals: a watchdog client can
// send (and finish) an acquisition between the note and the signal; its
// hold ends at the kill all the same.
func TestSoakCheckerHoldAfterNote(t *testing.T) {
	other := []soakEvent{
		{kind: "acq", client: 1, token: 11, call: 500 * msec, ret: 1010 * msec},
		{kind: "read?", client: 1, token: 11, call: 1011 * msec},
		{kind: "read", client: 1, token: 11, call: 1011 * msec, ret: 1012 * msec, ok: true, known: true, value: 0},
		{kind: "rel?", client: 1, token: 11, call: 1100 * msec},
		{kind: "rel", client: 1, token: 11, call: 1100 * msec, ret: 1101 * msec, ok: true, known: true},
	}
	killed := append([]soakEvent{
		{kind: "killed", client: 0, call: 500_000}, // 0.5ms
		{kind: "acq", client: 0, token: 10, call: 1 * msec, ret: 2 * msec},
	}, other...)
	if r := checkSoakGroup("watchdog", killed, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("killed just after the note: %v", r.problems)
	}
	paused := append([]soakEvent{
		{kind: "paused", client: 0, call: 500_000},
		{kind: "acq", client: 0, token: 10, call: 1 * msec, ret: 2 * msec},
	}, other...)
	paused = append(paused, []soakEvent{ // SIGCONT at 1502ms
		{kind: "lost", client: 0, token: 10, call: 1503 * msec},
		{kind: "read?", client: 0, token: 10, call: 1503 * msec},
		{kind: "read", client: 0, token: 10, call: 1503 * msec, ret: 1504 * msec, ok: false, known: true, value: 11},
		{kind: "rel?", client: 0, token: 10, call: 1505 * msec},
		{kind: "rel", client: 0, token: 10, call: 1505 * msec, ret: 1505 * msec, ok: false, known: true},
	}...)
	if r := checkSoakGroup("watchdog", paused, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("paused just after the note: %v", r.problems)
	}
}

// A lost watchdog hold ended at the library's deadline (last renewal sent
// + lease - margin, 1588ms here), not when its "lost" goroutine ran: a
// wake-up late by more than the margin (12ms) is no overlap.
func TestSoakCheckerLostSeenLate(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "renewed", client: 0, call: 300 * msec},
		{kind: "renewed", client: 0, call: 600 * msec},
		// partitioned: renewals fail; the server expires the hold at 1600ms
		{kind: "acq", client: 1, token: 11, call: 700 * msec, ret: 1605 * msec},
		{kind: "lost", client: 0, token: 10, call: 1620 * msec}, // Done closed at 1588ms
		{kind: "rel?", client: 1, token: 11, call: 1700 * msec},
		{kind: "rel", client: 1, token: 11, call: 1700 * msec, ret: 1701 * msec, ok: true, known: true},
		{kind: "rel?", client: 0, token: 10, call: 1625 * msec},
		{kind: "rel", client: 0, token: 10, call: 1625 * msec, ret: 1626 * msec, ok: false, known: true},
	}
	if r := checkSoakGroup("watchdog", es, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("Done closed on time, its goroutine woke 32ms late: %v", r.problems)
	}
}

// A semaphore acquisition that took longer than the lease was never
// lease-valid: its reversed interval (until < from) must not hide a third
// holder.
func TestSoakCheckerSemaphoreSlowAcquisition(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 3, call: 0, ret: 2000 * msec, value: 1},
	}
	for c := range 3 {
		es = append(es,
			soakEvent{kind: "acq", client: c, call: 1000 * msec, ret: 1000 * msec, value: 1},
			soakEvent{kind: "rel?", client: c, call: 1200 * msec, value: 1},
			soakEvent{kind: "rel", client: c, call: 1200 * msec, ret: 1201 * msec, ok: true, known: true, value: 1})
	}
	es = append(es, soakEvent{kind: "rel?", client: 3, call: 2001 * msec, value: 1},
		soakEvent{kind: "rel", client: 3, call: 2001 * msec, ret: 2002 * msec, ok: true, known: true, value: 1})
	if r := checkSemaphoreGroup(es, time.Second, 2); r.overlaps == 0 {
		t.Errorf("three permits at once not caught: %v", r)
	}
}

// The model matches a release or an expiry to its hold, not just its
// client: the expiry of client 0's earlier hold (token 10, released with
// an unknown outcome) must not free its later hold (token 11), so that a
// grant while the server still keeps token 11 is caught.
func TestSoakCheckerExpiryOfEarlierHold(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "rel?", client: 0, token: 10, call: 5 * msec},
		{kind: "rel", client: 0, token: 10, call: 5 * msec, ret: 10 * msec, ok: false, known: false},
		{kind: "acq", client: 0, token: 11, call: 20 * msec, ret: 21 * msec},
		{kind: "killed", client: 0, call: 500 * msec},
		{kind: "acq", client: 1, token: 12, call: 600 * msec, ret: 1010 * msec},
		{kind: "rel?", client: 1, token: 12, call: 1100 * msec},
		{kind: "rel", client: 1, token: 12, call: 1100 * msec, ret: 1101 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("mutex", es, time.Second, 0, 0); !notLinearizable(r) {
		t.Errorf("token 12 granted while token 11 was on the server until >= 1020ms, not caught: %v", r)
	}
}

// As TestSoakCheckerLostSeenLate, but the main loop sent the unlock before
// the "lost" goroutine woke (so the line does not count as a loss).
func TestSoakCheckerLostAfterUnlockSent(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "renewed", client: 0, call: 300 * msec},
		{kind: "renewed", client: 0, call: 600 * msec},
		{kind: "acq", client: 1, token: 11, call: 700 * msec, ret: 1605 * msec},
		{kind: "rel?", client: 0, token: 10, call: 1610 * msec},
		{kind: "lost", client: 0, token: 10, call: 1620 * msec},
		{kind: "rel", client: 0, token: 10, call: 1610 * msec, ret: 1621 * msec, ok: false, known: true},
		{kind: "rel?", client: 1, token: 11, call: 1700 * msec},
		{kind: "rel", client: 1, token: 11, call: 1700 * msec, ret: 1701 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("watchdog", es, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("lost at 1588ms, unlock sent at 1610ms: %v", r.problems)
	}
}

// Re-entries: an inner unlock keeps the hold; one that released it, so
// that another client acquired before the outer unlock, is caught; a
// re-entry after the hold was lost takes a new hold, which its inner
// unlock releases.
func TestSoakCheckerReentry(t *testing.T) {
	held := func(leaveOK bool, other int64) []soakEvent {
		return []soakEvent{
			{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
			{kind: "enter", client: 0, token: 10, call: 2 * msec, ret: 3 * msec, ok: true, known: true},
			{kind: "read?", client: 0, token: 10, call: 4 * msec},
			{kind: "read", client: 0, token: 10, call: 4 * msec, ret: 5 * msec, ok: true, known: true, value: 0},
			{kind: "leave", client: 0, token: 10, call: 6 * msec, ret: 7 * msec, ok: leaveOK, known: true},
			{kind: "write?", client: 0, token: 10, call: 8 * msec, value: 1},
			{kind: "write", client: 0, token: 10, call: 8 * msec, ret: 9 * msec, ok: true, known: true, value: 1},
			{kind: "rel?", client: 0, token: 10, call: 100 * msec},
			{kind: "rel", client: 0, token: 10, call: 100 * msec, ret: 101 * msec, ok: true, known: true},
			{kind: "acq", client: 1, token: 11, call: 5 * msec, ret: other},
			{kind: "rel?", client: 1, token: 11, call: other + 10*msec},
			{kind: "rel", client: 1, token: 11, call: other + 10*msec, ret: other + 11*msec, ok: true, known: true},
		}
	}
	if r := checkSoakGroup("mutex", held(true, 200*msec), time.Second, 1, 1); len(r.problems) > 0 {
		t.Errorf("a re-entered hold, left and unlocked: %v", r.problems)
	}
	if r := checkSoakGroup("mutex", held(true, 50*msec), time.Second, 1, 1); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("another client acquired between the inner and the outer unlock, not caught: %v", r)
	}
	for _, group := range []string{"mutex", "watchdog"} {
		if r := checkSoakGroup(group, held(true, 200*msec), time.Second, 1, 1); len(r.problems) > 0 {
			t.Errorf("%s: a re-entered hold: %v", group, r.problems)
		}
	}

	// The first hold's fixed lease ran out before the re-entry, which
	// took token 12; its inner unlock released it, and the outer unlock
	// found nothing to release.
	renewed := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "enter", client: 0, token: 12, call: 1200 * msec, ret: 1201 * msec, ok: true, known: true},
		{kind: "leave", client: 0, token: 12, call: 1300 * msec, ret: 1301 * msec, ok: true, known: true},
		{kind: "rel", client: 0, token: 10, call: 1302 * msec, ret: 1303 * msec, ok: false, known: true},
		{kind: "acq", client: 1, token: 13, call: 1250 * msec, ret: 1302 * msec},
		{kind: "rel", client: 1, token: 13, call: 1400 * msec, ret: 1401 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("mutex", renewed, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("a re-entry that took a new hold after a loss: %v", r.problems)
	}
	back := slices.Clone(renewed)
	back[1].token, back[2].token = 9, 9 // a "new" hold whose token went back
	if r := checkSoakGroup("mutex", back, time.Second, 0, 0); !notLinearizable(r) {
		t.Errorf("a re-entry with a lower token not caught: %v", r)
	}
}

var soakLog = flag.String("soaklog", "", "TestSoakReplay: a history the soak wrote (dsync-soak-GROUP-*.log)")

// TestSoakReplay runs a group's checker again on a history the soak wrote
// when it found a violation (-soaklog=FILE), to study it. The register's
// totals are not in the history: its accepted writes stand for both.
func TestSoakReplay(t *testing.T) {
	if *soakLog == "" {
		t.Skip("no -soaklog")
	}
	b, err := os.ReadFile(*soakLog)
	if err != nil {
		t.Fatal(err)
	}
	var events []soakEvent
	var writes int64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		_, rest, _ := strings.Cut(line, " ") // the time, for people
		e, err := parseSoakEvent(rest)
		if err != nil {
			t.Fatal(err)
		}
		if e.kind == "write" && e.ok && e.known {
			writes++
		}
		events = append(events, e)
	}
	if len(events) == 0 {
		t.Fatal("an empty history")
	}
	g, ok := soakGroupNamed(events[0].group)
	if !ok {
		t.Fatalf("unknown group %q", events[0].group)
	}
	start := time.Now()
	r := g.check(events, soakLease, writes, writes)
	t.Logf("%s (checked in %v)", r, time.Since(start).Round(time.Millisecond))
	for _, p := range r.problems {
		t.Error(p)
	}
}

// A watchdog hold evicted soon after its acquisition (its Token failed),
// then re-entered by its owner once Done closed: the re-entry, its token
// unknown, took a new hold, which an eviction in the same window took too
// (the inner and outer unlocks found nothing), before the owner's next
// hold. Two expiries of the one chain, both in the window: no violation.
// A grant while a hold outside any window is kept is still caught.
func TestSoakCheckerReentryAfterEviction(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 0, call: 0, ret: 10 * msec},
		{kind: "acq", client: 1, token: 20, call: 100 * msec, ret: 110 * msec},
		{kind: "lost", client: 0, token: 0, call: 300 * msec},
		{kind: "enter", client: 0, token: 0, call: 301 * msec, ret: 310 * msec, ok: true, known: true},
		{kind: "leave", client: 0, token: 0, call: 312 * msec, ret: 315 * msec, ok: false, known: true},
		{kind: "rel?", client: 0, token: 0, call: 316 * msec},
		{kind: "rel", client: 0, token: 0, call: 316 * msec, ret: 317 * msec, ok: false, known: true},
		{kind: "acq", client: 0, token: 21, call: 318 * msec, ret: 322 * msec},
		{kind: "lost", client: 1, token: 20, call: 440 * msec},
		{kind: "rel?", client: 1, token: 20, call: 450 * msec},
		{kind: "rel", client: 1, token: 20, call: 450 * msec, ret: 451 * msec, ok: false, known: true},
		{kind: "rel?", client: 0, token: 21, call: 500 * msec},
		{kind: "rel", client: 0, token: 21, call: 500 * msec, ret: 501 * msec, ok: true, known: true},
	}
	evicted := soakEvent{kind: "evicted", client: -1, call: 0, ret: 1000 * msec, value: 1}
	if r := checkSoakGroup("watchdog", append(slices.Clone(es), evicted), time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("a re-entry after an eviction took a new hold, evicted too: %v", r.problems)
	}
	if r := checkSoakGroup("watchdog", es, time.Second, 0, 0); !notLinearizable(r) {
		t.Errorf("without an eviction, client 1 acquired while client 0's renewed hold was kept, not caught: %v", r)
	}
}

// An unlock that fails with ErrNotHeld may be the client's verdict, made
// without I/O, while the hold is still on the server: cut from a nemesis
// soak run (seed 17640369066931021874, commit e814924) to its two holds.
// Client 0's acquisition, sent in a stall, returned after its lease had
// run out by the client's reckoning (the lease counts from the send), so
// the client counted the hold lost; its re-entry found the hold on the
// server (the same token) and extended it, and the inner unlock gave back
// the lease the re-entry started, so the outer unlock had nothing left to
// release and returned ErrNotHeld at once (92µs), leaving the hold on the
// server until its expiry. An eviction that began after that unlock
// returned ended it, and the owner's next acquisition was granted. The
// checker took the failed unlock for the server finding the hold gone,
// kept the eviction from ending it, and called the history Illegal.
// Without the eviction, the grant while the re-entered hold was kept is
// still caught.
func TestSoakCheckerEvictedAfterUnlockFoundNothing(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1204 * msec},
		{kind: "enter", client: 0, token: 10, call: 1205 * msec, ret: 1406 * msec, ok: true, known: true},
		{kind: "read?", client: 0, token: 10, call: 1406 * msec},
		{kind: "read", client: 0, token: 10, call: 1406 * msec, ret: 1408 * msec, ok: true, known: true, value: 0},
		{kind: "leave", client: 0, token: 10, call: 1409 * msec, ret: 1519 * msec, ok: true, known: true},
		{kind: "write?", client: 0, token: 10, call: 1519 * msec, value: 1},
		{kind: "write", client: 0, token: 10, call: 1519 * msec, ret: 1520 * msec, ok: true, known: true, value: 1},
		{kind: "rel?", client: 0, token: 10, call: 1520 * msec},
		{kind: "rel", client: 0, token: 10, call: 1520 * msec, ret: 1520*msec + 92_000, ok: false, known: true},
		{kind: "acq", client: 0, token: 20, call: 1521 * msec, ret: 1561 * msec},
		{kind: "read?", client: 0, token: 20, call: 1562 * msec},
		{kind: "read", client: 0, token: 20, call: 1562 * msec, ret: 1563 * msec, ok: true, known: true, value: 1},
		{kind: "write?", client: 0, token: 20, call: 1564 * msec, value: 2},
		{kind: "write", client: 0, token: 20, call: 1564 * msec, ret: 1565 * msec, ok: true, known: true, value: 2},
		{kind: "rel?", client: 0, token: 20, call: 1600 * msec},
		{kind: "rel", client: 0, token: 20, call: 1600 * msec, ret: 1601 * msec, ok: true, known: true},
	}
	evicted := soakEvent{kind: "evicted", client: -1, call: 1547 * msec, ret: 2880 * msec, value: 70}
	if r := checkSoakGroup("mutex", append(slices.Clone(es), evicted), time.Second, 2, 2); len(r.problems) > 0 {
		t.Errorf("a hold whose unlock found nothing to release, evicted after it: %v", r.problems)
	}
	if r := checkSoakGroup("mutex", es, time.Second, 2, 2); !notLinearizable(r) {
		t.Errorf("without an eviction, a grant while the re-entered hold was kept, not caught: %v", r)
	}
}
