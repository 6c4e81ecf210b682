package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/tripmeter"
)

// vanishing deletes a lock key right after the next script call that
// names it runs, and holds that call's reply back for a while, as a slow
// network would: the hold vanishes while its release is in flight.
type vanishing struct {
	backend.Backend
	key   string
	hold  time.Duration
	armed atomic.Bool
}

func (v *vanishing) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	reply, err := v.Backend.Eval(ctx, s, keys, args...)
	// Renewals name one key; the release names the lock's companions too.
	if len(keys) > 1 && keys[0] == v.key && v.armed.CompareAndSwap(true, false) {
		if _, derr := v.Backend.Eval(ctx, delScript, []string{v.key}); derr != nil {
			return nil, derr
		}
		time.Sleep(v.hold)
	}
	return reply, err
}

func (s *suite) testLostSignalDuringPartialRelease(t *testing.T, ctx context.Context, k lockKind) {
	const leaseD = time.Second
	p := prefix()
	v := &vanishing{Backend: s.newBackend(t), key: k.key(p, "partial"), hold: leaseD / 2}
	m := k.open(v, "partial", lockConfig{prefix: p, watchdog: leaseD})
	o := dsync.WithOwner(ctx)
	must(t, m.LockContext(o), "lock")
	must(t, m.LockContext(o), "re-enter")
	done := m.Done(o)
	v.armed.Store(true)
	// The partial release runs, then the hold vanishes, and a renewal
	// (every lease/3) finds it gone while the release's reply is held.
	must(t, m.UnlockContext(o), "partial unlock")
	within(t, s.bound(leaseD/3+200*time.Millisecond), done, "lost signal of a hold that vanished during a partial release")
	if _, err := m.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Token after the loss: %v, want ErrNotHeld", err)
	}
	if err := m.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock after the loss: %v, want ErrNotHeld", err)
	}
}

func (s *suite) testUnlockEndedContext(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	m := k.open(s.newBackend(t), "ended", lockConfig{prefix: p})
	other := k.open(s.newBackend(t), "ended", lockConfig{prefix: p})
	for _, ended := range []string{"cancelled", "past its deadline"} {
		var octx context.Context
		var cancel context.CancelFunc
		if ended == "cancelled" {
			octx, cancel = context.WithCancel(dsync.WithOwner(ctx))
		} else {
			octx, cancel = context.WithTimeout(dsync.WithOwner(ctx), 200*time.Millisecond)
		}
		must(t, m.LockContext(octx), "lock")
		done := m.Done(octx)
		if ended == "cancelled" {
			cancel()
		} else {
			<-octx.Done()
		}
		// The deferred unlock of a request whose context has ended. It
		// returns 100ms after the call at the latest: on a loaded
		// machine, with the ctx's error, the release going on, which
		// Done tells the end of. Round trips timed meanwhile show how
		// long the machine held up the release's.
		trips := tripmeter.Start(t, ctx, s.newBackend(t))
		err := m.UnlockContext(octx)
		if err != nil && !errors.Is(err, octx.Err()) {
			t.Errorf("%s ctx: UnlockContext: %v, want the release done", ended, err)
		}
		cancel()
		withinTrips(t, s.bound(time.Second), done, trips, "Done after the release")
		trips.Stop()
		if locked, err := other.IsLocked(ctx); err != nil || locked {
			t.Errorf("%s ctx: after UnlockContext the lock is held: %v, %v", ended, locked, err)
		}
	}
	// The ownerless hold, too.
	m.Lock()
	done := m.Done(ctx)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	if err := m.UnlockContext(cctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("ownerless UnlockContext with a cancelled ctx: %v, want the release done", err)
	}
	withinTrips(t, s.bound(time.Second), done, trips, "Done after the ownerless release")
	trips.Stop()
	if locked, err := other.IsLocked(ctx); err != nil || locked {
		t.Errorf("ownerless: after UnlockContext the lock is held: %v, %v", locked, err)
	}
}

func (s *suite) testUnlockThroughAnotherBackend(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	sp := newSpy(s.newBackend(t))
	m1 := k.open(sp, "twob", lockConfig{prefix: p, watchdog: time.Second})
	m2 := k.open(s.newBackend(t), "twob", lockConfig{prefix: p, watchdog: time.Second})
	o := dsync.WithOwner(ctx)

	// Taken through one backend value: a release through another is
	// refused, saying why, and leaves the hold as it was.
	must(t, m1.LockContext(o), "lock through the first backend")
	done := m1.Done(o)
	err := m2.UnlockContext(o)
	if !errors.Is(err, dsync.ErrNotHeld) || !strings.Contains(err.Error(), "another backend value") {
		t.Fatalf("unlock through the second backend: %v; want ErrNotHeld naming the other backend value", err)
	}
	if n, err := m1.HoldCount(o); err != nil || n != 1 {
		t.Fatalf("after the refused unlock: HoldCount %d, %v; want 1", n, err)
	}
	select {
	case <-done:
		t.Fatal("the refused unlock ended the hold's lease")
	default:
	}
	must(t, m1.UnlockContext(o), "unlock through the first backend")
	if locked, err := m1.IsLocked(ctx); err != nil || locked {
		t.Fatalf("after the unlock through the first backend: locked %v, %v", locked, err)
	}
	within(t, s.bound(time.Second), done, "Done of the hold kept through the first backend")
	// Its watchdog stopped: nothing touches the key for three renewals.
	before := sp.touched(k.key(p, "twob"))
	time.Sleep(time.Second)
	if n := sp.touched(k.key(p, "twob")) - before; n != 0 {
		t.Errorf("%d calls touched the key after the release; the watchdog must stop", n)
	}

	// Re-entered through the second: one hold on the server, which each
	// backend value releases as often as it took it, with no loss
	// reported. A machine that holds up the watchdog's exchanges with the
	// server for two thirds of its lease or more (miniredis under -race,
	// packages in parallel) may lose the hold meanwhile: such an attempt,
	// and only such, is made once more.
	for attempt := 1; ; attempt++ {
		stall, lost := s.reenterThroughAnother(t, ctx, k, p, fmt.Sprintf("twob-%d", attempt))
		if !lost {
			return
		}
		if stall < 2*time.Second/3 {
			t.Fatalf("the hold kept through the first backend ended when the second released its share (longest stall of an exchange with the server meanwhile %v)", stall)
		}
		if attempt == 2 {
			t.Fatalf("the hold kept through the first backend ended, in two attempts; the machine held up an exchange with the server for %v", stall)
		}
		t.Logf("the hold ended while the machine held up an exchange with the server for %v, two thirds of the watchdog's lease or more: once more", stall)
	}
}

// reenterThroughAnother takes name through one backend value, re-enters
// it through another, and releases each share through the value that took
// it. It returns the longest stall of an exchange with the server while
// only the first share was held (see tripmeter.Meter), and whether that
// share was lost meanwhile.
func (s *suite) reenterThroughAnother(t *testing.T, ctx context.Context, k lockKind, p, name string) (time.Duration, bool) {
	m1 := k.open(s.newBackend(t), name, lockConfig{prefix: p, watchdog: time.Second})
	m2 := k.open(s.newBackend(t), name, lockConfig{prefix: p, watchdog: time.Second})
	o := dsync.WithOwner(ctx)
	must(t, m1.LockContext(o), "lock through the first backend")
	must(t, m2.LockContext(o), "re-enter through the second backend")
	if n, err := m2.HoldCount(o); err != nil || n != 2 {
		t.Fatalf("HoldCount after re-entering through another backend: %d, %v; want 2", n, err)
	}
	done1, done2 := m1.Done(o), m2.Done(o)
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	must(t, m2.UnlockContext(o), "unlock through the second backend")
	within(t, s.bound(time.Second), done2, "Done through the second backend after its unlock")
	time.Sleep(time.Second) // three renewals of the hold kept through the first
	stall := trips.Stop()
	select {
	case <-done1:
		return stall, true
	default:
	}
	if n, err := m1.HoldCount(o); err != nil || n != 1 {
		t.Fatalf("after the second backend's unlock: HoldCount %d, %v; want 1", n, err)
	}
	if err := m2.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("a second unlock through the second backend: %v, want ErrNotHeld", err)
	}
	must(t, m1.UnlockContext(o), "unlock through the first backend")
	within(t, s.bound(time.Second), done1, "Done after the final unlock")
	if locked, err := m1.IsLocked(ctx); err != nil || locked {
		t.Errorf("after two unlocks: locked %v, %v", locked, err)
	}
	return stall, false
}

var (
	setScript = backend.NewScript(`-- KEYS[1] key; ARGV[1] value. Reply: OK.
return redis.call('SET', KEYS[1], ARGV[1])`)
	hsetScript = backend.NewScript(`-- KEYS[1] key; ARGV[1] field, ARGV[2] value. Reply: fields added.
return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])`)
	typeScript = backend.NewScript(`-- KEYS[1] key. Reply: its type.
return redis.call('TYPE', KEYS[1]).ok`)
	getScript = backend.NewScript(`-- KEYS[1] key. Reply: its value.
return redis.call('GET', KEYS[1])`)
)

func (s *suite) testForeignValue(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	b := s.newBackend(t)
	for _, foreign := range []string{"string", "hash"} {
		name := "foreign-" + foreign
		key := k.key(p, name)
		if foreign == "string" {
			_, err := b.Eval(ctx, setScript, []string{key}, "hello")
			must(t, err, "SET")
		} else {
			_, err := b.Eval(ctx, hsetScript, []string{key}, "f", "v")
			must(t, err, "HSET")
		}
		m := k.open(b, name, lockConfig{prefix: p})
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		err := m.LockContext(lctx)
		cancel()
		if !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("%s at the key: LockContext: %v, want ErrUnexpectedReply", foreign, err)
		} else if d := time.Since(start); d > s.bound(time.Second) {
			t.Errorf("%s at the key: LockContext took %v to fail; it must not retry", foreign, d)
		}
		if ok, err := m.TryLockContext(ctx); ok || !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("%s at the key: TryLockContext: %v, %v; want ErrUnexpectedReply", foreign, ok, err)
		}
		typ, err := b.Eval(ctx, typeScript, []string{key})
		must(t, err, "TYPE")
		if typ != foreign {
			t.Errorf("%s at the key: now a %v", foreign, typ)
		}
		if foreign == "string" {
			v, err := b.Eval(ctx, getScript, []string{key})
			must(t, err, "GET")
			if v != "hello" {
				t.Errorf("the foreign value was overwritten: %q", v)
			}
		}
	}
}
