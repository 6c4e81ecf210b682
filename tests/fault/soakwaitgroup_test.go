package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/waitgroup"
)

// The waitgroup group of the soak: each client, one time in two, is a
// worker that adds a unit (a handle of its own, on the soak's fixed
// lease), works 0-200ms and counts it down; otherwise it waits (3s at
// most). Checked: a Wait that returns nil saw the count at 0 (some instant
// of its call had no lease-valid unit pending); one that returns the
// abandoned error came after a unit could have been abandoned (its lease
// run out with its Done not applied); one that returns ErrVanished came
// with an eviction of the group's keys.
func waitGroupSoakGroup() soakGroup {
	return soakGroup{name: "waitgroup", clients: 4,
		carries: []string{"dsync:waitgroup:{soak}", "dsync:waitgroup:{soak}:holders", "dsync:waitgroup:{soak}:waiters", "dsync:waitgroup:{soak}:done"},
		check: func(events []soakEvent, lease time.Duration, _, _ int64) soakReport {
			return checkWaitGroupGroup(events, lease)
		},
		run: soakWaitGroup,
		free: func(ctx context.Context, b []backend.Backend) error {
			// Abandoned units are reported until the count is 0.
			g := waitgroup.New(b[0], "soak", waitgroup.WithLogger(nil))
			for {
				if err := g.Wait(ctx); !errors.Is(err, dsync.ErrAbandoned) {
					return err
				}
			}
		},
	}
}

// Wait outcomes, in the value of a wait event.
const (
	waitZero = iota
	waitAbandoned
	waitVanished
	waitOther
)

// soakWaitGroup is a client of the waitgroup group. Events: add? and add
// (token: the unit's), done? and done, wait (value: its outcome).
func soakWaitGroup(c *soakEnv) error {
	opts := []waitgroup.Option{waitgroup.WithLease(c.lease), waitgroup.WithLogger(nil)}
	for c.now() < c.end {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		g := waitgroup.New(c.b[0], "soak", opts...)
		if c.rng.IntN(2) == 0 {
			token, call := c.rng.Int64(), c.now()
			c.say(soakEvent{kind: "add?", token: token, call: call})
			err := g.Add(ctx, 1)
			c.say(soakEvent{kind: "add", token: token, call: call, ret: c.now(), ok: err == nil, known: true})
			if err == nil {
				time.Sleep(time.Duration(c.rng.IntN(200)) * time.Millisecond)
				dcall := c.now()
				c.say(soakEvent{kind: "done?", token: token, call: dcall})
				err := g.Done(ctx)
				c.say(soakEvent{kind: "done", token: token, call: dcall, ret: c.now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
			}
		} else {
			call := c.now()
			err := g.Wait(ctx)
			outcome := waitOther
			switch {
			case err == nil:
				outcome = waitZero
			case errors.Is(err, dsync.ErrAbandoned):
				outcome = waitAbandoned
			case errors.Is(err, waitgroup.ErrVanished):
				outcome = waitVanished
			}
			c.say(soakEvent{kind: "wait", call: call, ret: c.now(), ok: err == nil, known: true, value: int64(outcome)})
		}
		cancel()
	}
	return nil
}

// checkWaitGroupGroup checks the waitgroup group's events (see
// waitGroupSoakGroup). A unit is surely pending from its Add's reply until
// its Done was sent, or its lease less the margin ran out (counted from
// when its Add was sent), or an eviction of the group's keys began, unless
// its Done then counted it down (it was there all along). It may have been
// abandoned once its lease could have run out (its Add sent a lease ago)
// if no Done of it had returned by then.
func checkWaitGroupGroup(events []soakEvent, lease time.Duration) soakReport {
	var r soakReport
	type unit struct {
		call, from, until, done, doneRet int64
		added, counted                   bool
	}
	margin := int64(lease/100 + 2*time.Millisecond)
	us := map[int64]*unit{}
	var waits, evictions []soakEvent
	for _, e := range events {
		switch e.kind {
		case "add?":
			us[e.token] = &unit{call: e.call, from: never, until: never, done: never, doneRet: never}
		case "wait":
			waits = append(waits, e)
		case "evicted":
			evictions = append(evictions, e)
		}
	}
	for _, e := range events {
		u := us[e.token]
		switch {
		case u == nil:
		case e.kind == "add" && e.ok:
			u.added, u.from, u.until = true, e.ret, e.call+int64(lease)-margin
		case e.kind == "done?":
			u.done = min(u.done, e.call)
		case e.kind == "done" && e.ok:
			u.counted, u.doneRet = true, e.ret
		}
	}
	type span struct{ from, until int64 }
	var pending []span
	for _, u := range us {
		if !u.added {
			continue
		}
		end := min(u.until, u.done)
		for _, ev := range evictions {
			if !u.counted && ev.call < end && ev.ret > u.from {
				end = max(u.from, ev.call)
			}
		}
		if end > u.from {
			pending = append(pending, span{u.from, end})
		}
	}
	slices.SortFunc(pending, func(a, b span) int { return int(a.from - b.from) })
	var outcomes [4]int
	for _, w := range waits {
		outcomes[w.value]++
		switch w.value {
		case waitZero:
			// Some instant of the call without a unit surely pending.
			covered := w.call
			for _, s := range pending {
				if s.from > covered {
					break
				}
				covered = max(covered, s.until)
			}
			if covered >= w.ret {
				r.overlaps++
				r.fail("waitgroup: a Wait (%s to %s) returned nil while units were pending throughout",
					time.Unix(0, w.call).Format("15:04:05.000000"), time.Unix(0, w.ret).Format("15:04:05.000000"))
			}
		case waitAbandoned:
			if !slices.ContainsFunc(slices.Collect(mapValues(us)), func(u *unit) bool {
				expiry := u.call + int64(lease) - margin
				return expiry <= w.ret && !(u.counted && u.doneRet < expiry)
			}) {
				r.fail("waitgroup: a Wait (%s to %s) returned the abandoned error with no unit whose lease could have run out",
					time.Unix(0, w.call).Format("15:04:05.000000"), time.Unix(0, w.ret).Format("15:04:05.000000"))
			}
		case waitVanished:
			if !slices.ContainsFunc(evictions, func(ev soakEvent) bool { return ev.call <= w.ret && ev.ret >= w.call }) {
				r.fail("waitgroup: a Wait (%s to %s) returned ErrVanished without an eviction of the group's keys",
					time.Unix(0, w.call).Format("15:04:05.000000"), time.Unix(0, w.ret).Format("15:04:05.000000"))
			}
		}
	}
	if outcomes[waitZero] == 0 {
		r.fail("waitgroup: no Wait returned nil: the workload did not run")
	}
	var counted int
	for _, u := range us {
		counted += boolInt(u.counted)
	}
	r.summary = fmt.Sprintf("waitgroup: %d units added, %d counted down; %d waits: %d saw the count at 0, %d units abandoned, %d the state vanished, %d other errors; %d nil returns with units pending throughout",
		len(us), counted, len(waits), outcomes[waitZero], outcomes[waitAbandoned], outcomes[waitVanished], outcomes[waitOther], r.overlaps)
	return r
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// The waitgroup checker catches a Wait that returns nil while a unit is
// surely pending, an abandoned error before any lease could run out, and
// ErrVanished without an eviction; and lets each pass when it may be.
func TestSoakCheckerWaitGroup(t *testing.T) {
	const lease = time.Second
	wait := func(call, ret int64, outcome int) soakEvent {
		return soakEvent{kind: "wait", client: 2, call: call, ret: ret, ok: outcome == waitZero, known: true, value: int64(outcome)}
	}
	// Units 1 (0-300ms) and 2 (200-500ms), counted down, after a Wait on
	// the empty group.
	units := func(more ...soakEvent) []soakEvent {
		es := []soakEvent{
			{kind: "add?", client: 0, token: 1, call: 0},
			{kind: "add", client: 0, token: 1, call: 0, ret: 1 * msec, ok: true, known: true},
			{kind: "add?", client: 1, token: 2, call: 200 * msec},
			{kind: "add", client: 1, token: 2, call: 200 * msec, ret: 201 * msec, ok: true, known: true},
			{kind: "done?", client: 0, token: 1, call: 300 * msec},
			{kind: "done", client: 0, token: 1, call: 300 * msec, ret: 301 * msec, ok: true, known: true},
			{kind: "done?", client: 1, token: 2, call: 500 * msec},
			{kind: "done", client: 1, token: 2, call: 500 * msec, ret: 501 * msec, ok: true, known: true},
			wait(-10*msec, -9*msec, waitZero),
		}
		return append(es, more...)
	}
	if r := checkWaitGroupGroup(units(wait(100*msec, 502*msec, waitZero)), lease); len(r.problems) > 0 {
		t.Errorf("a Wait that returned after the last Done: %v", r.problems)
	}
	if r := checkWaitGroupGroup(units(wait(100*msec, 450*msec, waitZero)), lease); r.overlaps == 0 {
		t.Errorf("a Wait that returned nil with unit 2 pending throughout, not caught: %v", r)
	}
	// Unit 2's Done never returns (its client killed): abandoned once its
	// lease could have run out, not before.
	killed := append(slices.Delete(units(), 6, 8), wait(100*msec, 1300*msec, waitAbandoned))
	if r := checkWaitGroupGroup(killed, lease); len(r.problems) > 0 {
		t.Errorf("an abandoned error after unit 2's lease: %v", r.problems)
	}
	killed[7] = wait(100*msec, 900*msec, waitAbandoned) // before unit 2's lease could run out
	if r := checkWaitGroupGroup(killed, lease); len(r.problems) == 0 {
		t.Errorf("an abandoned error before any lease could run out, not caught: %v", r)
	}
	if r := checkWaitGroupGroup(units(wait(600*msec, 2000*msec, waitAbandoned)), lease); len(r.problems) == 0 {
		t.Errorf("an abandoned error for units counted down in time, not caught: %v", r)
	}
	// ErrVanished only with an eviction.
	vanished := units(wait(100*msec, 450*msec, waitVanished))
	if r := checkWaitGroupGroup(vanished, lease); len(r.problems) == 0 {
		t.Errorf("ErrVanished without an eviction, not caught: %v", r)
	}
	vanished = append(vanished, soakEvent{kind: "evicted", client: -1, call: 400 * msec, ret: 410 * msec, value: 1})
	if r := checkWaitGroupGroup(vanished, lease); len(r.problems) > 0 {
		t.Errorf("ErrVanished after an eviction: %v", r.problems)
	}
	// An eviction ends a unit whose Done then finds it gone: a nil return
	// after it is no violation.
	evicted := units(soakEvent{kind: "evicted", client: -1, call: 400 * msec, ret: 410 * msec, value: 1}, wait(100*msec, 450*msec, waitZero))
	evicted[7].ok = false
	if r := checkWaitGroupGroup(evicted, lease); len(r.problems) > 0 {
		t.Errorf("a nil return after an eviction took the last unit: %v", r.problems)
	}
}
