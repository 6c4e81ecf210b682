package conformance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/waitgroup"
)

// waitgroupTests are the cases of the wait group: the wake-up at a count
// of 0, abandoned units reported (or kept), a vanished state reported,
// Done applied once, bad input.
func (s *suite) waitgroupRules() []rule {
	return []rule{
		{"WaitEndsAtZero", "Wait returns nil at once on an empty group, and otherwise when the Done that empties it wakes every waiter through pub/sub, in every process; the keys vanish with nobody waiting", false, s.testWGZero},
		{"AbandonedUnitsReported", "units whose owner's lease ran out end every Wait with an error matching dsync.ErrAbandoned that names their owner and count, within the lease and 200ms, and the group's other units count on", false, s.testWGAbandoned},
		{"KeepAbandoned", "with WithKeepAbandoned, units whose lease ran out stay pending and keep Wait waiting", false, s.testWGKeep},
		{"VanishedStateReported", "the group's state deleted under a waiter is reported with ErrVanished, not taken for a count of 0; the owners' Done is then ErrNotHeld", false, s.testWGVanished},
		{"RetriesAppliedOnce", "a Done retried after a lost reply counts once; an Add whose reply was lost is undone", false, s.testWGOnce},
		{"BadInput", "bad input is a sentinel error before any I/O", false, s.testWGBadInput},
	}
}

func wgOpen(b backend.Backend, p string, opts ...waitgroup.Option) *waitgroup.WaitGroup {
	return waitgroup.New(b, "wg", append([]waitgroup.Option{waitgroup.WithPrefix(p), waitgroup.WithLogger(nil)}, opts...)...)
}

func wgKey(p string) string {
	key, err := keys.Base(p, "waitgroup", "wg")
	if err != nil {
		panic(err)
	}
	return key
}

type wgResult struct {
	err error
	at  time.Time
}

// wgWait starts g.Wait and waits until it is registered on the server.
func (s *suite) wgWait(t *testing.T, ctx context.Context, g, probe *waitgroup.WaitGroup, registered int) <-chan wgResult {
	t.Helper()
	c := wgStart(ctx, g)
	s.wgRegistered(t, ctx, probe, registered, c)
	return c
}

// wgStart runs g.Wait on a goroutine of its own.
func wgStart(ctx context.Context, g *waitgroup.WaitGroup) <-chan wgResult {
	c := make(chan wgResult, 1)
	go func() {
		err := g.Wait(ctx)
		c <- wgResult{err, time.Now()}
	}()
	return c
}

// wgRegistered waits until registered waiters are, as probe says, or one
// of the Waits cs returned already: a Wait that finds units abandoned
// returns without registering.
func (s *suite) wgRegistered(t *testing.T, ctx context.Context, probe *waitgroup.WaitGroup, registered int, cs ...<-chan wgResult) {
	t.Helper()
	deadline := time.Now().Add(s.bound(5 * time.Second))
	for i := 0; ; i++ {
		st, err := probe.State(ctx)
		must(t, err, "state")
		if st.Waiters >= registered || slices.ContainsFunc(cs, func(c <-chan wgResult) bool { return len(c) > 0 }) {
			return
		}
		if time.Now().After(deadline) || i > 100000 {
			t.Fatalf("%d waiters not registered within %v (%+v)", registered, s.bound(5*time.Second), st)
		}
		time.Sleep(time.Millisecond)
	}
}

// Two workers on backends of their own add 1 and 2 units; three waiters,
// each on a backend of its own as a process of its own, return once the
// last Done did, within 50ms, and not before.
func (s *suite) testWGZero(t *testing.T, ctx context.Context) {
	p := prefix()
	pb := s.newBackend(t)
	probe := wgOpen(pb, p)
	must(t, probe.Wait(ctx), "Wait on an empty group")
	a, b := wgOpen(s.newBackend(t), p), wgOpen(s.newBackend(t), p)
	must(t, a.Add(ctx, 1), "add 1")
	must(t, b.Add(ctx, 2), "add 2")
	var waits []<-chan wgResult
	for i := range 3 {
		waits = append(waits, s.wgWait(t, ctx, wgOpen(elsewhere{s.newBackend(t)}, p), probe, i+1))
	}
	must(t, a.Done(ctx), "done")
	must(t, b.Done(ctx), "done")
	st, err := probe.State(ctx)
	must(t, err, "state")
	if st.Count != 1 || len(st.Owners) != 1 || st.Owners[0].Owner != b.Owner() || st.Owners[0].Units != 1 {
		t.Fatalf("state %+v, want 1 unit of %s", st, b.Owner())
	}
	for _, w := range waits {
		select {
		case r := <-w:
			t.Fatalf("Wait returned with a unit pending: %v", r.err)
		default:
		}
	}
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	must(t, b.Done(ctx), "last done")
	last := time.Now()
	var rs []wgResult
	for _, w := range waits {
		r := within(t, s.bound(time.Second), w, "Wait after the last Done")
		must(t, r.err, "Wait")
		rs = append(rs, r)
	}
	slow := trips.Stop()
	for _, r := range rs {
		if d := r.at.Sub(last); d > s.bound(50*time.Millisecond)+3*slow {
			t.Errorf("Wait returned %v after the last Done, want within %v, and %v more for the longest round trip timed meanwhile, three times", d, s.bound(50*time.Millisecond), slow)
		}
	}
	if err := b.Done(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Done with nothing pending = %v, want ErrNotHeld", err)
	}
	assertNoKeys(t, ctx, pb, p, wgKey(p), 2*waitgroup.DefaultWaiterTimeout+time.Second)
}

// A worker on a 300ms fixed lease never counts its 2 units down: two
// waiters learn it, naming them, within the lease and 200ms; the other
// worker's unit still counts down, after which the group is empty.
func (s *suite) testWGAbandoned(t *testing.T, ctx context.Context) {
	p := prefix()
	const lease = 300 * time.Millisecond
	probe := wgOpen(s.newBackend(t), p)
	dead := wgOpen(s.newBackend(t), p, waitgroup.WithLease(lease))
	live := wgOpen(s.newBackend(t), p)
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	must(t, live.Add(ctx, 1), "add")
	must(t, dead.Add(ctx, 2), "add")
	added := time.Now()
	// Both wait from the start: a waiter started once the other had
	// registered was told a registration's round trips later.
	w1, w2 := wgStart(ctx, wgOpen(s.newBackend(t), p)), wgStart(ctx, wgOpen(s.newBackend(t), p))
	s.wgRegistered(t, ctx, probe, 2, w1, w2)
	var rs []wgResult
	for _, w := range []<-chan wgResult{w1, w2} {
		r := within(t, s.bound(lease+time.Second), w, "Wait")
		var ab *waitgroup.AbandonedError
		if !errors.Is(r.err, dsync.ErrAbandoned) || !errors.As(r.err, &ab) || ab.Owner != dead.Owner() || ab.Units != 2 {
			t.Fatalf("Wait = %v, want the 2 units of %s abandoned", r.err, dead.Owner())
		}
		rs = append(rs, r)
	}
	// A waiter learns it by timers and round trips: a machine that runs
	// them late (seen beside two CPU hogs: 569ms, 1.05s) is allowed the
	// longest lag timed meanwhile, three times.
	slow := trips.Stop()
	for _, r := range rs {
		if d := r.at.Sub(added); d > lease+s.bound(200*time.Millisecond)+3*slow {
			t.Errorf("told %v after the Add, on a %v lease (and %v for the longest round trip timed meanwhile, three times)", d, lease, slow)
		}
	}
	if err := wgOpen(s.newBackend(t), p).Wait(ctx); !errors.Is(err, dsync.ErrAbandoned) {
		t.Errorf("a later Wait = %v, want ErrAbandoned until the count is 0", err)
	}
	must(t, live.Done(ctx), "done")
	must(t, probe.Wait(ctx), "Wait once the count is 0")
}

// With WithKeepAbandoned, a unit whose lease ran out keeps Wait waiting.
func (s *suite) testWGKeep(t *testing.T, ctx context.Context) {
	p := prefix()
	dead := wgOpen(s.newBackend(t), p, waitgroup.WithLease(100*time.Millisecond), waitgroup.WithKeepAbandoned())
	must(t, dead.Add(ctx, 1), "add")
	wctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	if err := wgOpen(s.newBackend(t), p).Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
	st, err := dead.State(ctx)
	must(t, err, "state")
	if st.Count != 1 || st.Abandoned != nil || len(st.Owners) != 1 || st.Owners[0].Lease > 0 {
		t.Errorf("state %+v, want the unit pending, its lease ended", st)
	}
	b := s.newBackend(t)
	_, err = b.Eval(ctx, backend.NewScript("return redis.call('DEL', KEYS[1], KEYS[2])"), []string{wgKey(p), wgKey(p) + ":holders"})
	must(t, err, "delete")
}

// The group's keys deleted under a waiter: it returns ErrVanished at its
// next heartbeat; the owner's Done is ErrNotHeld.
func (s *suite) testWGVanished(t *testing.T, ctx context.Context) {
	p := prefix()
	const timeout = 300 * time.Millisecond
	probe := wgOpen(s.newBackend(t), p)
	owner := wgOpen(s.newBackend(t), p)
	must(t, owner.Add(ctx, 1), "add")
	w := s.wgWait(t, ctx, wgOpen(s.newBackend(t), p, waitgroup.WithWaiterTimeout(timeout)), probe, 1)
	b := s.newBackend(t)
	k := wgKey(p)
	_, err := b.Eval(ctx, backend.NewScript("return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])"), []string{k, k + ":holders", k + ":waiters", k + ":done"})
	must(t, err, "delete")
	r := within(t, s.bound(timeout+time.Second), w, "Wait after the deletion")
	if !errors.Is(r.err, waitgroup.ErrVanished) {
		t.Fatalf("Wait = %v, want ErrVanished", r.err)
	}
	if err := owner.Done(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Done of a vanished unit = %v, want ErrNotHeld", err)
	}
}

// A Done whose reply is lost is retried and counts once; an Add whose
// reply is lost fails and is undone.
func (s *suite) testWGOnce(t *testing.T, ctx context.Context) {
	p := prefix()
	sp := newSpy(s.newBackend(t))
	g := wgOpen(sp, p)
	probe := wgOpen(s.newBackend(t), p)
	must(t, g.Add(ctx, 3), "add")
	sp.loseReplies(1)
	must(t, g.Done(ctx), "done with its reply lost")
	st, err := probe.State(ctx)
	must(t, err, "state")
	if st.Count != 2 {
		t.Fatalf("count %d after one Done retried, want 2", st.Count)
	}
	sp.loseReplies(1)
	if err := g.Add(ctx, 5); err == nil {
		t.Fatal("Add with its reply lost reported no error")
	}
	deadline := time.Now().Add(s.bound(5 * time.Second))
	for st.Count != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		st, err = probe.State(ctx)
		must(t, err, "state")
	}
	if st.Count != 2 {
		t.Fatalf("count %d after an Add whose reply was lost, want 2 (undone)", st.Count)
	}
	must(t, g.Done(ctx), "done")
	must(t, g.Done(ctx), "done")
	must(t, probe.Wait(ctx), "Wait")
}

func (s *suite) testWGBadInput(t *testing.T, ctx context.Context) {
	b := newSpy(s.newBackend(t))
	g := waitgroup.New(b, "wg", waitgroup.WithPrefix(prefix()))
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"Add(0)", g.Add(ctx, 0), dsync.ErrInvalidPermits},
		{"Add(-2)", g.Add(ctx, -2), dsync.ErrInvalidPermits},
		{"Done with nothing added", g.Done(ctx), dsync.ErrNotHeld},
		{"empty name", waitgroup.New(b, "").Wait(ctx), dsync.ErrInvalidName},
		{"nil backend", waitgroup.New(nil, "wg").Add(ctx, 1), dsync.ErrInvalidBackend},
		{"sub-millisecond lease", waitgroup.New(b, "wg", waitgroup.WithLease(time.Microsecond)).Add(ctx, 1), dsync.ErrInvalidLease},
		{"zero value", new(waitgroup.WaitGroup).Done(ctx), dsync.ErrInvalidBackend},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.err, c.want)
		}
	}
	if n := b.count(); n != 0 {
		t.Errorf("%d calls reached the backend", n)
	}
}
