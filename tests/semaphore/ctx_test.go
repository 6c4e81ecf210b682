package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// hooked runs hook before (or, with after, once the server ran it) the
// k-th call (from 1) of the script whose header starts with prefix.
type hooked struct {
	backend.Backend
	prefix string
	k      atomic.Int64
	after  bool
	hook   func()
	calls  atomic.Int64
}

func (h *hooked) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	hit := strings.Contains("\n"+s.Source(), "\n"+h.prefix) && h.calls.Add(1) == h.k.Load()
	if hit && !h.after {
		h.hook()
	}
	reply, err := h.Backend.Eval(ctx, s, keys, args...)
	if hit && h.after {
		h.hook()
	}
	return reply, err
}

// A waiter's ctx ending at any point of its acquisition (while queued,
// just as a release hands it the permit, during the attempt that confirms
// the hand-off, before or after the server ran it) leaves either the
// permit acquired (no error) or nothing: the permit then goes to the
// waiter behind within 1s, and permits never exceed the capacity.
func TestContextEndsAnywhere(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type point struct {
		name  string
		k     int64 // the acquire call of the waiter, 0 for a timer, -1 for the first after the release
		after bool
	}
	points := []point{
		{"timer", 0, false},
		{"before its attempt after the release", -1, false},
		{"after its attempt after the release", -1, true},
		{"before its 1st attempt", 1, false},
		{"after its 1st attempt", 1, true},
	}
	acquired, failed := 0, 0
	for round := range 40 {
		p := points[round%len(points)]
		name := "ctxany-" + dsync.NewID()[:8]
		holder := semaphore.New(srv.NewBackend(t), name, 1)
		if err := holder.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		wo := dsync.WithOwner(ctx)
		wctx, wcancel := context.WithCancel(wo)
		hb := &hooked{Backend: srv.NewBackend(t), prefix: "-- acquire:", after: p.after, hook: wcancel}
		hb.k.Store(p.k)
		w := semaphore.New(hb, name, 1, semaphore.WithLogger(nil))
		wGot := acquire(wctx, w, 1)
		if p.k != 1 {
			awaitState(t, ctx, holder, "w queued", func(st semaphore.State) bool { return st.Queued == 1 })
		}
		if p.k < 0 {
			hb.k.Store(hb.calls.Load() + 1)
		}
		x := semaphore.New(srv.NewBackend(t), name, 1)
		xGot := acquire(ctx, x, 1)
		if p.k == 0 {
			go func() {
				time.Sleep(time.Duration(rand.N(1500)) * time.Microsecond)
				wcancel()
			}()
		}
		if err := holder.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		var werr error
		select {
		case werr = <-wGot:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d (%s): w still waiting 5s after the release and its ctx's end", round, p.name)
		}
		wcancel()
		if werr == nil {
			acquired++
			idle(t, "x while w holds the only permit", xGot)
			st, err := holder.State(wo)
			if err != nil || st.Held != 1 {
				t.Fatalf("round %d (%s): w acquired; state %+v, %v", round, p.name, st, err)
			}
			start := time.Now()
			if err := w.Release(wo, 1); err != nil {
				t.Fatalf("round %d (%s): w's release: %v", round, p.name, err)
			}
			within(t, "x after w's release", xGot, start, time.Second)
		} else {
			failed++
			if !errors.Is(werr, context.Canceled) {
				t.Errorf("round %d (%s): w = %v, want context.Canceled", round, p.name, werr)
			}
			within(t, "x after w gave up", xGot, time.Now(), time.Second)
			st, err := holder.State(wo)
			if err != nil || st.Held != 1 || st.Permits != 0 || st.Queued != 0 {
				t.Fatalf("round %d (%s): w gave up; state %+v, %v; want only x's permit", round, p.name, st, err)
			}
		}
		if err := x.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if k := keysLeft(t, ctx, srv, "dsync:semaphore:{"+name+"}*"); len(k) != 0 {
			t.Fatalf("round %d (%s): keys left: %v", round, p.name, k)
		}
	}
	t.Logf("%d rounds acquired, %d gave up", acquired, failed)
}

// A TryAcquire whose ctx ends while the server runs it leaves nothing
// acquired when it reports an error; State, SetCapacity and Acquire with
// an ended ctx do no I/O.
func TestContextEndsTryAcquire(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "ctxtry-" + dsync.NewID()[:8]
	for round := range 10 {
		tctx, tcancel := context.WithCancel(dsync.WithOwner(ctx))
		hb := &hooked{Backend: srv.NewBackend(t), prefix: "-- acquire:", after: round%2 == 1, hook: tcancel}
		hb.k.Store(1)
		s := semaphore.New(hb, name, 2, semaphore.WithLogger(nil))
		ok, err := s.TryAcquire(tctx, 2)
		tcancel()
		st, serr := s.State(dsync.WithOwner(ctx))
		if serr != nil {
			t.Fatal(serr)
		}
		if ok != (err == nil) || (ok && st.Held != 2) || (!ok && st.Held != 0) {
			t.Fatalf("round %d: TryAcquire with its ctx ended = %v, %v; state %+v", round, ok, err, st)
		}
		if ok {
			if err := s.Release(tctx, 2); err != nil { // an ended ctx still releases
				t.Fatal(err)
			}
		}
	}
	var calls atomic.Int64
	s := semaphore.New(counting{srv.NewBackend(t), &calls}, name, 2)
	dead, c := context.WithCancel(ctx)
	c()
	if err := s.SetCapacity(dead, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("SetCapacity with an ended ctx = %v", err)
	}
	if _, err := s.Available(dead); !errors.Is(err, context.Canceled) {
		t.Errorf("Available with an ended ctx = %v", err)
	}
	if err := s.Acquire(dead, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with an ended ctx = %v", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls with an ended ctx", n)
	}
}

// An expired ctx fails before any I/O; one that expires while waiting
// leaves the queue and nothing acquired.
func TestExpiredContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		var calls atomic.Int64
		sem := semaphore.New(counting{fake.FakeBackend(t, srv), &calls}, "ctx", 2)
		dead, cancel := context.WithCancel(ctx)
		cancel()
		if err := sem.Acquire(dead, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire with a cancelled ctx = %v", err)
		}
		if _, err := sem.TryAcquire(dead, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("TryAcquire with a cancelled ctx = %v", err)
		}
		if _, err := sem.State(dead); !errors.Is(err, context.Canceled) {
			t.Errorf("State with a cancelled ctx = %v", err)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("%d calls with a cancelled ctx", n)
		}
		if err := sem.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		other := semaphore.New(fake.FakeBackend(t, srv), "ctx", 2)
		short, cancel2 := context.WithTimeout(ctx, 3*time.Second)
		defer cancel2()
		if err := other.Acquire(short, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire past its deadline = %v", err)
		}
		st, err := sem.State(ctx)
		if err != nil || st.Queued != 0 || st.Held != 2 || st.Holders != 1 {
			t.Errorf("after a waiter gave up: %+v, %v; want it gone, 2 held by one", st, err)
		}
		// A release with a cancelled ctx still releases.
		if err := sem.Release(dead, 2); err != nil {
			t.Errorf("Release with a cancelled ctx = %v", err)
		}
		if k := fakeKeysLeft(srv); len(k) != 0 {
			t.Errorf("keys left: %v", k)
		}
	})
}
