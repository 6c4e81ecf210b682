package fault

// Re-entry cases of the soak's checker found by an adversarial review of
// 8ac9282: histories a correct lock can produce that the checker called
// violations, and a violation it let through.

import (
	"testing"
	"time"
)

// A re-entry sent in the expiry margin of a fixed lease (the client's lease
// ran out at 988ms, its hold is on the server until >= 1000ms) finds the
// hold still there: the script re-enters it (same token, count 2) and
// extends it to a full lease from the re-entry; the client starts a new
// lease with the same token. The inner unlock (1005ms) and the outer one
// (1010ms) then release it. The checker extended the hold's expiry only
// for a re-entry sent before 988ms, so the model expired it at <= 1001ms
// and the inner unlock was Illegal.
func TestSoakCheckerReentryInMargin(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		// client 0 is slow (or stopped) for 991ms here
		{kind: "enter", client: 0, token: 10, call: 992 * msec, ret: 993 * msec, ok: true, known: true},
		{kind: "read?", client: 0, token: 10, call: 994 * msec},
		{kind: "read", client: 0, token: 10, call: 994 * msec, ret: 995 * msec, ok: true, known: true, value: 0},
		{kind: "leave", client: 0, token: 10, call: 1005 * msec, ret: 1006 * msec, ok: true, known: true},
		{kind: "write?", client: 0, token: 10, call: 1007 * msec, value: 1},
		{kind: "write", client: 0, token: 10, call: 1007 * msec, ret: 1008 * msec, ok: true, known: true, value: 1},
		{kind: "rel?", client: 0, token: 10, call: 1010 * msec},
		{kind: "rel", client: 0, token: 10, call: 1010 * msec, ret: 1011 * msec, ok: true, known: true},
		// client 1 was handed the lock by that release
		{kind: "acq", client: 1, token: 11, call: 500 * msec, ret: 1012 * msec},
		{kind: "rel?", client: 1, token: 11, call: 1100 * msec},
		{kind: "rel", client: 1, token: 11, call: 1100 * msec, ret: 1101 * msec, ok: true, known: true},
	}
	for _, g := range []string{"mutex", "fairlock", "rwlock"} {
		if r := checkSoakGroup(g, es, time.Second, 1, 1); len(r.problems) > 0 {
			t.Errorf("%s: a re-entry in the expiry margin: %v", g, r.problems)
		}
	}
}

// A re-entry whose Token() failed (token 0) after it took a NEW hold: the
// first hold expired on the server (~1000ms) while client 0 was stopped;
// the re-entry (1502ms) took token 11, and client 0 was stopped again,
// past that hold's lease, before its Token() (2704ms). Its unlocks find
// the holds lost (ErrNotHeld). Token 11 expired by ~2503ms, and client 1
// took token 12 at 2600ms. The model let the unknown-token re-entry take a
// new hold, but nothing ever expired that hold: Illegal.
func TestSoakCheckerReentryTokenUnknownNewHold(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "paused", client: 0, call: 2 * msec},
		{kind: "paused", client: 0, call: 1504 * msec},
		{kind: "enter", client: 0, token: 0, call: 1502 * msec, ret: 2704 * msec, ok: true, known: true},
		{kind: "leave", client: 0, token: 10, call: 2707 * msec, ret: 2707 * msec, ok: false, known: true},
		{kind: "rel?", client: 0, token: 10, call: 2710 * msec},
		{kind: "rel", client: 0, token: 10, call: 2710 * msec, ret: 2710 * msec, ok: false, known: true},
		{kind: "acq", client: 1, token: 12, call: 2600 * msec, ret: 2601 * msec},
		{kind: "rel?", client: 1, token: 12, call: 2800 * msec},
		{kind: "rel", client: 1, token: 12, call: 2800 * msec, ret: 2801 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("mutex", es, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("a re-entry that took a new hold, token unknown: %v", r.problems)
	}
}

// Watchdog: the first hold was lost (server stopped, 650ms..2577ms); the
// re-entry, sent at 1590ms and run when the server came back, took a new
// hold (token 11), accepted just before it would have been too late; the
// client was cut off again, so that hold was lost too before the inner
// unlock, which found it lost (ErrNotHeld, no I/O). No "lost" line ever
// names token 11 (the client watches the first hold's Done) and the outer
// unlock names token 10: the checker kept token 11 valid forever (an
// overlap with every later hold) and never expired it in the model.
func TestSoakCheckerWatchdogReentryNewHoldLost(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "renewed", client: 0, call: 300 * msec},
		{kind: "renewed", client: 0, call: 600 * msec},
		{kind: "lost", client: 0, token: 10, call: 1588 * msec},
		{kind: "enter", client: 0, token: 11, call: 1590 * msec, ret: 2578 * msec, ok: true, known: true},
		{kind: "leave", client: 0, token: 11, call: 2601 * msec, ret: 2601 * msec, ok: false, known: true},
		{kind: "rel?", client: 0, token: 10, call: 2602 * msec},
		{kind: "rel", client: 0, token: 10, call: 2602 * msec, ret: 2602 * msec, ok: false, known: true},
		// token 11 expired on the server by 3577ms at the latest
		{kind: "acq", client: 1, token: 12, call: 2700 * msec, ret: 3600 * msec},
		{kind: "rel?", client: 1, token: 12, call: 3700 * msec},
		{kind: "rel", client: 1, token: 12, call: 3700 * msec, ret: 3701 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("watchdog", es, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("a new hold taken by a re-entry, lost before the inner unlock: %v", r.problems)
	}
}

// Watchdog: a re-entry at 900ms extends the hold on the server to a full
// lease (>= 1900ms) and the client's lease to 1888ms; then the client is
// cut off and its renewals fail. Client 1 acquiring at 1700ms is a
// violation (two lease-valid holders), but the checker bounded client 0's
// lost hold by its last renewal (600ms + 988ms), ignoring the re-entry,
// and let it through, in the overlap check and in porcupine (whose expiry
// of a watchdog hold starts at that bound). Likewise for a pause.
func TestSoakCheckerWatchdogReentryExtends(t *testing.T) {
	lost := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "renewed", client: 0, call: 300 * msec},
		{kind: "renewed", client: 0, call: 600 * msec},
		{kind: "enter", client: 0, token: 10, call: 900 * msec, ret: 901 * msec, ok: true, known: true},
		{kind: "lost", client: 0, token: 10, call: 1888 * msec},
		{kind: "leave", client: 0, token: 10, call: 1890 * msec, ret: 1890 * msec, ok: false, known: true},
		{kind: "rel?", client: 0, token: 10, call: 1891 * msec},
		{kind: "rel", client: 0, token: 10, call: 1891 * msec, ret: 1891 * msec, ok: false, known: true},
		{kind: "acq", client: 1, token: 11, call: 1200 * msec, ret: 1700 * msec},
		{kind: "rel?", client: 1, token: 11, call: 2000 * msec},
		{kind: "rel", client: 1, token: 11, call: 2000 * msec, ret: 2001 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("watchdog", lost, time.Second, 0, 0); r.overlaps == 0 {
		t.Errorf("token 11 granted at 1700ms, client 0's re-entered hold valid until 1888ms, not caught: %v", r)
	}
	paused := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "renewed", client: 0, call: 300 * msec},
		{kind: "renewed", client: 0, call: 600 * msec},
		{kind: "enter", client: 0, token: 10, call: 900 * msec, ret: 901 * msec, ok: true, known: true},
		{kind: "read?", client: 0, token: 10, call: 902 * msec},
		{kind: "paused", client: 0, call: 903 * msec},
		{kind: "acq", client: 1, token: 11, call: 1200 * msec, ret: 1700 * msec},
		{kind: "rel?", client: 1, token: 11, call: 2000 * msec},
		{kind: "rel", client: 1, token: 11, call: 2000 * msec, ret: 2001 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("watchdog", paused, time.Second, 0, 0); r.overlaps == 0 {
		t.Errorf("paused: token 11 granted at 1700ms, client 0's re-entered hold valid until 1888ms, not caught: %v", r)
	}
}

// What the fixes above relax must still catch the violations next to
// them: a grant to another client after the first hold's expiry but
// within the lease a re-entry (in the margin, or with its token unknown
// but surely a re-entry, having returned before the first hold could
// expire) extended it to.
func TestSoakCheckerReentryExtensionStillChecked(t *testing.T) {
	margin := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		{kind: "enter", client: 0, token: 10, call: 992 * msec, ret: 993 * msec, ok: true, known: true},
		{kind: "leave", client: 0, token: 10, call: 1005 * msec, ret: 1006 * msec, ok: true, known: true},
		{kind: "rel?", client: 0, token: 10, call: 1010 * msec},
		{kind: "rel", client: 0, token: 10, call: 1010 * msec, ret: 1011 * msec, ok: true, known: true},
		{kind: "acq", client: 1, token: 11, call: 500 * msec, ret: 1003 * msec},
		{kind: "rel?", client: 1, token: 11, call: 1100 * msec},
		{kind: "rel", client: 1, token: 11, call: 1100 * msec, ret: 1101 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("mutex", margin, time.Second, 0, 0); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("token 11 granted at 1003ms, within the lease the re-entry extended: %v", r)
	}
	unknown := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
		// re-entered by 501ms (before the first hold could expire), then
		// stopped past the extended lease before Token()
		{kind: "paused", client: 0, call: 502 * msec},
		{kind: "enter", client: 0, token: 0, call: 500 * msec, ret: 501 * msec, ok: true, known: true},
		{kind: "acq", client: 1, token: 11, call: 900 * msec, ret: 1200 * msec},
		{kind: "rel?", client: 1, token: 11, call: 1300 * msec},
		{kind: "rel", client: 1, token: 11, call: 1300 * msec, ret: 1301 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("mutex", unknown, time.Second, 0, 0); !notLinearizable(r) {
		t.Errorf("token 11 granted at 1200ms, while the re-entered hold was on the server until >= 1500ms: %v", r)
	}
}

// The acquisition's Token() failed (token 0: a plain hold's token is drawn
// by a round trip, and the server was restarting), and the re-entry, run
// once the server was back, told the hold's token (11): the same hold,
// its token drawn then (its key persisted through the restart). The inner
// unlock names token 11, the outer one token 0, and it released the hold
// (13ms); client 1 was handed it then. The checker took token 11 for a new
// hold, since it differs from the acquisition's (0), left the outer unlock
// to no hold, and kept the first valid a lease from its acquisition: an
// overlap with client 1's (found by the nemesis soak, seed
// 3981651698968925168, in CI).
func TestSoakCheckerReentryTellsUnknownToken(t *testing.T) {
	es := []soakEvent{
		{kind: "acq", client: 0, token: 0, call: 0, ret: 17 * msec},
		{kind: "enter", client: 0, token: 11, call: 17 * msec, ret: 252 * msec, ok: true, known: true},
		{kind: "leave", client: 0, token: 11, call: 255 * msec, ret: 263 * msec, ok: true, known: true},
		{kind: "rel?", client: 0, token: 0, call: 264 * msec},
		{kind: "rel", client: 0, token: 0, call: 264 * msec, ret: 269 * msec, ok: true, known: true},
		{kind: "acq", client: 1, token: 12, call: 100 * msec, ret: 270 * msec},
		{kind: "rel?", client: 1, token: 12, call: 300 * msec},
		{kind: "rel", client: 1, token: 12, call: 300 * msec, ret: 301 * msec, ok: true, known: true},
	}
	for _, g := range []string{"mutex", "fairlock", "multilock", "watchdog"} {
		if r := checkSoakGroup(g, es, time.Second, 0, 0); len(r.problems) > 0 {
			t.Errorf("%s: a re-entry that told the hold's unknown token: %v", g, r.problems)
		}
	}
	// Or the first hold expired (1000ms) before the re-entry (1300ms),
	// which took a new one (token 12) after client 1's (token 11): its
	// inner unlock released that, and the outer unlock found nothing.
	lost := []soakEvent{
		{kind: "acq", client: 0, token: 0, call: 0, ret: 1 * msec},
		{kind: "acq", client: 1, token: 11, call: 500 * msec, ret: 1002 * msec},
		{kind: "rel?", client: 1, token: 11, call: 1100 * msec},
		{kind: "rel", client: 1, token: 11, call: 1100 * msec, ret: 1101 * msec, ok: true, known: true},
		{kind: "enter", client: 0, token: 12, call: 1300 * msec, ret: 1301 * msec, ok: true, known: true},
		{kind: "leave", client: 0, token: 12, call: 1302 * msec, ret: 1303 * msec, ok: true, known: true},
		{kind: "rel?", client: 0, token: 0, call: 1304 * msec},
		{kind: "rel", client: 0, token: 0, call: 1304 * msec, ret: 1305 * msec, ok: false, known: true},
		{kind: "acq", client: 1, token: 13, call: 1303 * msec, ret: 1306 * msec},
		{kind: "rel?", client: 1, token: 13, call: 1400 * msec},
		{kind: "rel", client: 1, token: 13, call: 1400 * msec, ret: 1401 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("mutex", lost, time.Second, 0, 0); len(r.problems) > 0 {
		t.Errorf("a re-entry that took a new hold after the first, token unknown, expired: %v", r.problems)
	}
	// Still checked: a token the re-entry tells must be newer than every
	// earlier hold's; and the hold it extended is valid a lease from it.
	old := []soakEvent{
		{kind: "acq", client: 1, token: 11, call: 0, ret: 1 * msec},
		{kind: "rel?", client: 1, token: 11, call: 5 * msec},
		{kind: "rel", client: 1, token: 11, call: 5 * msec, ret: 6 * msec, ok: true, known: true},
		{kind: "acq", client: 0, token: 0, call: 10 * msec, ret: 11 * msec},
		{kind: "enter", client: 0, token: 11, call: 12 * msec, ret: 13 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("mutex", old, time.Second, 0, 0); !notLinearizable(r) {
		t.Errorf("a re-entry told token 11, the previous hold's: %v", r)
	}
	extended := []soakEvent{
		{kind: "acq", client: 0, token: 0, call: 0, ret: 1 * msec},
		{kind: "enter", client: 0, token: 11, call: 500 * msec, ret: 501 * msec, ok: true, known: true},
		{kind: "acq", client: 1, token: 12, call: 900 * msec, ret: 1200 * msec},
		{kind: "rel?", client: 1, token: 12, call: 1300 * msec},
		{kind: "rel", client: 1, token: 12, call: 1300 * msec, ret: 1301 * msec, ok: true, known: true},
	}
	if r := checkSoakGroup("mutex", extended, time.Second, 0, 0); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("token 12 granted at 1200ms, within the lease the re-entry (token 11) extended to 1488ms: %v", r)
	}
}

// One eviction window ends two holds of a chain: client 0's plain hold
// (taken at <= 20ms) was evicted before its Token() (token 0), client 1
// took the lock (token 11) and gave it back, client 0's re-entry queued
// behind it and was handed a new hold (it told token 12), which the same
// window's eviction ended too (its inner and outer unlocks found nothing),
// and client 1 took the lock again (token 20: the fence key was evicted
// too). The checker gave the chain one expiry for the window, which the
// first hold used up, so that the new hold was kept a lease from the
// re-entry and client 1's second grant was Illegal (found by the nemesis
// soak on fairrev, seed 479841592463115407: clients 4 and 31 of the
// fairlock group, 01:37:40.34-40.38).
func TestSoakCheckerReentryNewHoldEvictedInSameWindow(t *testing.T) {
	es := func(windowEnd int64) []soakEvent {
		return []soakEvent{
			{kind: "evicted", client: -1, call: 0, ret: windowEnd, value: 1},
			{kind: "acq", client: 0, token: 0, call: 10 * msec, ret: 20 * msec},
			{kind: "acq", client: 1, token: 11, call: 15 * msec, ret: 21 * msec},
			{kind: "enter", client: 0, token: 12, call: 22 * msec, ret: 40 * msec, ok: true, known: true},
			{kind: "rel?", client: 1, token: 11, call: 25 * msec},
			{kind: "rel", client: 1, token: 11, call: 25 * msec, ret: 27 * msec, ok: true, known: true},
			{kind: "acq", client: 1, token: 20, call: 28 * msec, ret: 42 * msec},
			{kind: "leave", client: 0, token: 12, call: 45 * msec, ret: 48 * msec, ok: false, known: true},
			{kind: "rel?", client: 0, token: 0, call: 49 * msec},
			{kind: "rel", client: 0, token: 0, call: 49 * msec, ret: 51 * msec, ok: false, known: true},
			{kind: "rel?", client: 1, token: 20, call: 60 * msec},
			{kind: "rel", client: 1, token: 20, call: 60 * msec, ret: 61 * msec, ok: true, known: true},
		}
	}
	for _, g := range []string{"mutex", "fairlock", "multilock"} {
		if r := checkSoakGroup(g, es(1000*msec), time.Second, 0, 0); len(r.problems) > 0 {
			t.Errorf("%s: a re-entry's new hold evicted in the window that ended the first: %v", g, r.problems)
		}
		// Still checked: with the window closed before the re-entry, its
		// new hold was kept, and token 20 was granted while it was.
		if r := checkSoakGroup(g, es(21*msec), time.Second, 0, 0); !notLinearizable(r) {
			t.Errorf("%s: a grant while the re-entry's new hold, taken after the eviction, was kept, not caught: %v", g, r)
		}
	}
}
