package waitgroup_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/waitgroup"
)

func prefix() string { return "wgtest:" + dsync.NewID()[:10] }

func open(b backend.Backend, p string, opts ...waitgroup.Option) *waitgroup.WaitGroup {
	return waitgroup.New(b, "g", append([]waitgroup.Option{waitgroup.WithPrefix(p), waitgroup.WithLogger(nil)}, opts...)...)
}

// waitAsync starts g.Wait and reports its error and when it returned.
type result struct {
	err error
	at  time.Time
}

func waitAsync(ctx context.Context, g *waitgroup.WaitGroup) <-chan result {
	c := make(chan result, 1)
	go func() {
		err := g.Wait(ctx)
		c <- result{err, time.Now()}
	}()
	return c
}

// registered waits until n waiters are registered on g.
func registered(t *testing.T, ctx context.Context, g *waitgroup.WaitGroup, n int) {
	t.Helper()
	for i := 0; ; i++ {
		st, err := g.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters >= n {
			return
		}
		if i == 5000 {
			t.Fatalf("%d waiters not registered within 5s (%+v)", n, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// keysUnder lists the keys under prefix p.
func keysUnder(t *testing.T, srv *testserver.Server, p string) []string {
	t.Helper()
	v, err := redis.Strings(srv.Do(context.Background(), "KEYS", p+":*"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Three handles, as three processes, add a unit each; waiters on two
// more backends return once the last Done did, not before, and the keys
// are gone once nobody waits.
func TestWaitEndsAtTheLastDone(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := prefix()
	var workers []*waitgroup.WaitGroup
	for range 3 {
		g := open(srv.NewBackend(t), p)
		if err := g.Add(ctx, 1); err != nil {
			t.Fatal(err)
		}
		workers = append(workers, g)
	}
	probe := open(srv.NewBackend(t), p)
	if st, err := probe.State(ctx); err != nil || st.Count != 3 {
		t.Fatalf("state %+v, %v; want 3 units", st, err)
	}
	var waits []<-chan result
	for range 2 {
		waits = append(waits, waitAsync(ctx, open(srv.NewBackend(t), p)))
	}
	registered(t, ctx, probe, 2)
	for _, g := range workers[:2] {
		if err := g.Done(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // no wait may return with a unit pending: time is what is tested
	for _, w := range waits {
		select {
		case r := <-w:
			t.Fatalf("Wait returned with a unit pending: %v", r.err)
		default:
		}
	}
	if err := workers[2].Done(ctx); err != nil {
		t.Fatal(err)
	}
	last := time.Now()
	for _, w := range waits {
		r := <-w
		if r.err != nil {
			t.Fatal(r.err)
		}
		if d := r.at.Sub(last); d > 500*time.Millisecond {
			t.Errorf("Wait returned %v after the last Done", d)
		}
	}
	if err := workers[0].Done(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("a second Done through a handle with nothing pending: %v, want ErrNotHeld", err)
	}
	if ks := keysUnder(t, srv, p); len(ks) > 1 || len(ks) == 1 && ks[0] != p+":waitgroup:{g}:done" {
		t.Errorf("keys left: %v", ks)
	}
	if err := open(srv.NewBackend(t), p).Wait(ctx); err != nil {
		t.Errorf("Wait on an empty group: %v", err)
	}
}

// A handle's units are its own: Add(2) then two Dones, the group empty
// after the second only.
func TestUnitsOfOneHandle(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := prefix()
	g := open(srv.NewBackend(t), p)
	if err := g.Add(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(ctx, 1); err != nil {
		t.Fatal(err)
	}
	st, err := g.State(ctx)
	if err != nil || st.Count != 3 || len(st.Owners) != 1 || st.Owners[0].Owner != g.Owner() || st.Owners[0].Units != 3 || st.Owners[0].Lease <= 0 {
		t.Fatalf("state %+v, %v; want 3 units of %s", st, err, g.Owner())
	}
	for i := range 3 {
		if err := g.Done(ctx); err != nil {
			t.Fatalf("Done %d: %v", i, err)
		}
	}
	if st, err := g.State(ctx); err != nil || st.Count != 0 {
		t.Fatalf("state %+v, %v; want 0 units", st, err)
	}
	if ks := keysUnder(t, srv, p); len(ks) != 0 {
		t.Errorf("keys left with nobody waiting: %v", ks)
	}
}

type countingBackend struct{ calls *atomic.Int64 }

func (c countingBackend) Eval(context.Context, *backend.Script, []string, ...any) (any, error) {
	c.calls.Add(1)
	return nil, errors.New("no I/O expected")
}

func (c countingBackend) Subscribe(context.Context, string) (backend.Subscription, error) {
	c.calls.Add(1)
	return nil, errors.New("no I/O expected")
}

func (c countingBackend) Close() error { return nil }

func TestBadInputBeforeIO(t *testing.T) {
	var calls atomic.Int64
	b := countingBackend{&calls}
	ctx := context.Background()
	g := waitgroup.New(b, "g")
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"Add(0)", g.Add(ctx, 0), dsync.ErrInvalidPermits},
		{"Add(-1)", g.Add(ctx, -1), dsync.ErrInvalidPermits},
		{"Done with nothing added", g.Done(ctx), dsync.ErrNotHeld},
		{"empty name", waitgroup.New(b, "").Wait(ctx), dsync.ErrInvalidName},
		{"nil backend", waitgroup.New(nil, "g").Add(ctx, 1), dsync.ErrInvalidBackend},
		{"zero lease", waitgroup.New(b, "g", waitgroup.WithLease(0)).Add(ctx, 1), dsync.ErrInvalidLease},
		{"zero value", new(waitgroup.WaitGroup).Wait(ctx), dsync.ErrInvalidBackend},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls to the backend", n)
	}
}

// A handle whose units are on a fixed lease and never done: every waiter
// returns an *AbandonedError naming them when the lease runs out, and so
// does a Wait that begins later, until the count is 0; the other units
// are still counted down.
func TestAbandonedUnitsEndTheWait(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := prefix()
	const lease = 400 * time.Millisecond
	dead := open(srv.NewBackend(t), p, waitgroup.WithLease(lease))
	live := open(srv.NewBackend(t), p)
	if err := live.Add(ctx, 1); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	if err := dead.Add(ctx, 2); err != nil {
		t.Fatal(err)
	}
	w1, w2 := waitAsync(ctx, open(srv.NewBackend(t), p)), waitAsync(ctx, open(srv.NewBackend(t), p))
	for _, w := range []<-chan result{w1, w2} {
		r := <-w
		var ab *waitgroup.AbandonedError
		if !errors.As(r.err, &ab) || !errors.Is(r.err, dsync.ErrAbandoned) || ab.Owner != dead.Owner() || ab.Units != 2 {
			t.Fatalf("Wait: %v; want the 2 units of %s abandoned", r.err, dead.Owner())
		}
		if d := r.at.Sub(added); d < lease || d > lease+200*time.Millisecond {
			t.Errorf("Wait returned %v after the Add on a %v lease", d, lease)
		}
	}
	st, err := live.State(ctx)
	if err != nil || st.Count != 1 || st.Abandoned == nil || st.Abandoned.Owner != dead.Owner() {
		t.Errorf("state %+v, %v; want 1 unit and the abandonment", st, err)
	}
	if err := open(srv.NewBackend(t), p).Wait(ctx); !errors.Is(err, dsync.ErrAbandoned) {
		t.Errorf("a later Wait: %v, want ErrAbandoned", err)
	}
	if err := dead.Done(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Done of abandoned units: %v, want ErrNotHeld", err)
	}
	if err := live.Done(ctx); err != nil {
		t.Fatal(err)
	}
	if err := open(srv.NewBackend(t), p).Wait(ctx); err != nil {
		t.Errorf("Wait once the count is 0: %v", err)
	}
}

// With WithKeepAbandoned, units whose lease ran out stay pending: a Wait
// waits until its ctx ends.
func TestKeepAbandoned(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := prefix()
	dead := open(srv.NewBackend(t), p, waitgroup.WithLease(100*time.Millisecond), waitgroup.WithKeepAbandoned())
	if err := dead.Add(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer wcancel()
	if err := open(srv.NewBackend(t), p).Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v, want DeadlineExceeded", err)
	}
	st, err := dead.State(ctx)
	if err != nil || st.Count != 1 || st.Abandoned != nil || len(st.Owners) != 1 || st.Owners[0].Lease > 0 {
		t.Fatalf("state %+v, %v; want the unit pending, its lease ended", st, err)
	}
	for _, k := range keysUnder(t, srv, p) {
		if ttl, _ := redis.Int64(srv.Do(ctx, "PTTL", k)); ttl != -1 && k != p+":waitgroup:{g}:waiters" {
			t.Errorf("key %s expires in %dms", k, ttl)
		}
	}
	srv.Do(ctx, "DEL", p+":waitgroup:{g}", p+":waitgroup:{g}:holders")
}

// The group's state deleted while a Wait waits is reported, not taken for
// a count of 0: the Wait ends with ErrVanished at its next heartbeat, and
// the owner's Done fails with ErrNotHeld.
func TestDeletedStateIsReported(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := prefix()
	const timeout = 300 * time.Millisecond
	owner := open(srv.NewBackend(t), p, waitgroup.WithWatchdog(600*time.Millisecond))
	if err := owner.Add(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waiter := open(srv.NewBackend(t), p, waitgroup.WithWaiterTimeout(timeout))
	w := waitAsync(ctx, waiter)
	registered(t, ctx, waiter, 1)
	if _, err := srv.Do(ctx, "DEL", p+":waitgroup:{g}", p+":waitgroup:{g}:holders", p+":waitgroup:{g}:waiters"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	r := <-w
	if !errors.Is(r.err, waitgroup.ErrVanished) {
		t.Fatalf("Wait: %v, want ErrVanished", r.err)
	}
	if d := r.at.Sub(deleted); d > timeout/3+200*time.Millisecond {
		t.Errorf("reported %v after the deletion; want within a heartbeat (%v)", d, timeout/3)
	}
	time.Sleep(300 * time.Millisecond) // a renewal finds the units gone
	if err := owner.Done(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Done after the deletion: %v, want ErrNotHeld", err)
	}
}
