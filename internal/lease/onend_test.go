package lease

import (
	"testing"
	"testing/synctest"
	"time"
)

// endSeen records what an OnEnd function was told.
type endSeen struct {
	calls  int
	lost   bool
	reason string
}

func (e *endSeen) f(lost bool, reason string) { e.calls, e.lost, e.reason = e.calls+1, lost, reason }

// TestOnEndTellsLossAndReason: every function waiting on a lease hears,
// once, when a renewal finds the hold gone, with the reason; a stopped one
// does not; one arranged after the end is called at once.
func TestOnEndTellsLossAndReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("onend:1", ttl), t0)
		var a, b, stopped endSeen
		l.OnEnd(a.f)
		l.OnEnd(b.f)
		stop := l.OnEnd(stopped.f)
		if !stop.Stop() {
			t.Fatal("stop of a waiting function reported false")
		}
		if stop.Stop() {
			t.Fatal("a second stop reported true")
		}
		f.drop("onend:1")
		sleepUntil(t0.Add(ttl / 3))
		assertEnded(t, f, l, true)
		for _, e := range []*endSeen{&a, &b} {
			if e.calls != 1 || !e.lost || e.reason != "hold no longer on the server" {
				t.Errorf("told %+v, want once, lost, \"hold no longer on the server\"", *e)
			}
		}
		if stopped.calls != 0 {
			t.Errorf("a stopped function was called %d times", stopped.calls)
		}
		if got := l.Reason(); got != "hold no longer on the server" {
			t.Errorf("Reason() = %q", got)
		}
		var late endSeen
		lateStop := l.OnEnd(late.f)
		if late.calls != 1 || !late.lost || late.reason != "hold no longer on the server" {
			t.Errorf("arranged after the end: told %+v, want at once, lost", late)
		}
		if lateStop.Stop() {
			t.Error("stop after the end reported true")
		}
	})
}

// TestOnEndTellsRelease: a release is told as not lost, without a reason,
// and the lease's Reason stays empty.
func TestOnEndTellsRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		l := h.start(f, watchdog("onend:2", 3*time.Second), time.Now())
		var e endSeen
		l.OnEnd(e.f)
		l.Release()
		if e.calls != 1 || e.lost || e.reason != "" {
			t.Errorf("told %+v, want once, released", e)
		}
		if got := l.Reason(); got != "" {
			t.Errorf("Reason() = %q after a release", got)
		}
	})
}

// TestOnEndTellsExpiry: a fixed lease that runs out is told as lost, with
// the expiry as its reason.
func TestOnEndTellsExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = time.Second
		t0 := time.Now()
		l := h.start(f, fixed("onend:3", ttl), t0)
		var e endSeen
		l.OnEnd(e.f)
		sleepUntil(t0.Add(ttl))
		if e.calls != 1 || !e.lost || e.reason != "lease expired" {
			t.Errorf("told %+v, want once, lost, \"lease expired\"", e)
		}
	})
}

// seenEnd is an Attach function: it records in arg, an *endSeen.
func seenEnd(arg any, lost bool, reason string) { arg.(*endSeen).f(lost, reason) }

// TestAttachAllocatesNothing: a hook the caller keeps, the lease's only
// one, is attached (and stopped) without an allocation; attached, it is
// told of the end with its argument; attached after the end, it is called
// at once.
func TestAttachAllocatesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		l := h.start(f, watchdog("attach:1", 3*time.Second), time.Now())
		var hook EndHook
		var seen endSeen
		if n := testing.AllocsPerRun(100, func() {
			l.Attach(&hook, seenEnd, &seen)
			if !hook.Stop() {
				t.Fatal("Stop of an attached hook reported false")
			}
		}); n != 0 {
			t.Errorf("Attach: %.1f allocations; want 0", n)
		}
		l.Attach(&hook, seenEnd, &seen)
		l.Release()
		if seen.calls != 1 || seen.lost {
			t.Fatalf("hook told %+v, want once, released", seen)
		}
		var late endSeen
		var lateHook EndHook
		l.Attach(&lateHook, seenEnd, &late)
		if late.calls != 1 || late.lost {
			t.Errorf("attached after the end: told %+v, want once, released", late)
		}
		if lateHook.Stop() {
			t.Error("Stop of a hook attached after the end reported true")
		}
	})
}
