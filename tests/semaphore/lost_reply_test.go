package semaphore_test

import (
	"context"
	"errors"
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

// dropper runs every script, and drops the reply of the next calls of the
// script whose header starts with its armed prefix ("-- release:", ...),
// as a timeout after the server ran it would; before reporting the loss
// it runs meanwhile, if set.
type dropper struct {
	backend.Backend
	armed    atomic.Pointer[string]
	times    atomic.Int64
	meanwhil func()
	dropped  atomic.Int64
}

func (d *dropper) arm(prefix string, times int64, meanwhile func()) {
	d.meanwhil = meanwhile
	d.times.Store(times)
	d.armed.Store(&prefix)
}

func (d *dropper) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	reply, err := d.Backend.Eval(ctx, s, keys, args...)
	if p := d.armed.Load(); err == nil && p != nil && strings.Contains("\n"+s.Source(), "\n"+*p) && d.times.Add(-1) >= 0 {
		d.dropped.Add(1)
		if d.times.Load() <= 0 {
			d.armed.Store(nil)
		}
		if m := d.meanwhil; m != nil {
			d.meanwhil = nil
			m()
		}
		return nil, errNet
	}
	return reply, err
}

// A release whose reply is lost, while the owner acquires again through
// another handle before the retry lands (a new hold, once the lost
// release gave the last permit back), releases once: the retry leaves the
// new hold alone.
func TestLostReleaseThenNewHold(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "lostrel-" + dsync.NewID()[:8]
	d := &dropper{Backend: srv.NewBackend(t)}
	s := semaphore.New(d, name, 3)
	other := semaphore.New(srv.NewBackend(t), name, 3)
	o := dsync.WithOwner(ctx)
	if err := s.Acquire(o, 2); err != nil {
		t.Fatal(err)
	}
	d.arm("-- release:", 1, func() {
		if err := other.Acquire(o, 1); err != nil {
			t.Error(err)
		}
	})
	if err := s.Release(o, 2); err != nil {
		t.Fatalf("release retried after its reply was lost: %v", err)
	}
	if d.dropped.Load() != 1 {
		t.Fatalf("%d replies dropped", d.dropped.Load())
	}
	st, err := other.State(o)
	if err != nil || st.Permits != 1 || st.Held != 1 {
		t.Fatalf("after a retried Release(2) and a new Acquire(1): %+v, %v; want the new permit held", st, err)
	}
	select {
	case <-other.Done(o):
		t.Fatal("the new hold's Done closed")
	default:
	}
	if err := other.Release(o, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(o, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("a release more = %v, want ErrNotHeld", err)
	}
}

// A partial release whose reply is lost twice, while a waiter is handed
// the freed permit, releases once: the waiter gets one permit, the owner
// keeps the rest, and its lease goes on.
func TestLostPartialReleaseWithHandOff(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "lostpart-" + dsync.NewID()[:8]
	d := &dropper{Backend: srv.NewBackend(t)}
	s := semaphore.New(d, name, 3, semaphore.WithWatchdog(600*time.Millisecond))
	w := semaphore.New(srv.NewBackend(t), name, 3)
	probe := semaphore.New(srv.NewBackend(t), name, 3)
	o := dsync.WithOwner(ctx)
	if err := s.Acquire(o, 3); err != nil {
		t.Fatal(err)
	}
	done := s.Done(o)
	wGot := acquire(ctx, w, 1)
	awaitState(t, ctx, probe, "w queued", func(st semaphore.State) bool { return st.Queued == 1 })
	w2 := semaphore.New(srv.NewBackend(t), name, 3)
	w2Got := acquire(ctx, w2, 2) // behind w: 1 free after w is not enough
	awaitState(t, ctx, probe, "w2 queued", func(st semaphore.State) bool { return st.Queued == 2 })
	d.arm("-- release:", 2, nil)
	if err := s.Release(o, 1); err != nil {
		t.Fatalf("release retried twice: %v", err)
	}
	within(t, "w handed the released permit", wGot, time.Now(), time.Second)
	st, err := s.State(o)
	if err != nil || st.Permits != 2 || st.Held != 3 || st.Queued != 1 {
		t.Fatalf("after one Release(1) retried twice: %+v, %v; want the owner's 2 and w's 1 held, w2 queued", st, err)
	}
	idle(t, "w2's Acquire(2) with nothing free", w2Got)
	time.Sleep(time.Second) // renewals of the owner's shrunk hold
	select {
	case <-done:
		t.Fatal("the owner's hold lost after a retried partial release")
	default:
	}
	start := time.Now()
	if err := s.Release(o, 2); err != nil {
		t.Fatal(err)
	}
	within(t, "w2 after the owner's last 2", w2Got, start, time.Second)
	w.Release(ctx, 1)
	w2.Release(ctx, 2)
	if st, err := probe.State(ctx); err != nil || st.Held != 0 {
		t.Errorf("at the end: %+v, %v", st, err)
	}
}

// A waiter whose acquisition is granted by one of its own attempts (the
// holder's lease ended), and whose reply is lost, counts its permits once
// on the retry; so does a waiter with an owner handed permits by a
// release, whose confirming attempt's reply is lost.
func TestLostAcquireReplyWhileQueued(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "lostacq-" + dsync.NewID()[:8]
	// The holder's permits expire (fixed lease, never released).
	holder := semaphore.New(srv.NewBackend(t), name, 3, semaphore.WithLease(300*time.Millisecond), semaphore.WithLogger(nil))
	if err := holder.Acquire(ctx, 3); err != nil {
		t.Fatal(err)
	}
	d := &dropper{Backend: srv.NewBackend(t)}
	w := semaphore.New(d, name, 3, semaphore.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	d.arm("-- acquire:", 2, nil) // its first attempt queues; the reply of the next is lost too
	if err := w.Acquire(o, 2); err != nil {
		t.Fatal(err)
	}
	if n := d.dropped.Load(); n != 2 {
		t.Fatalf("%d replies dropped, want 2", n)
	}
	probe := semaphore.New(srv.NewBackend(t), name, 3)
	st, err := w.State(o)
	if err != nil || st.Permits != 2 || st.Held != 2 {
		t.Fatalf("after an Acquire(2) whose replies were lost: %+v, %v; want 2 held", st, err)
	}
	// A hand-off by a release, to a waiter with an owner: its confirming
	// attempt's reply is lost.
	o2 := dsync.WithOwner(ctx)
	d2 := &dropper{Backend: srv.NewBackend(t)}
	w2 := semaphore.New(d2, name, 3, semaphore.WithLogger(nil))
	w2Got := acquire(o2, w2, 2)
	awaitState(t, ctx, probe, "w2 queued", func(st semaphore.State) bool { return st.Queued == 1 })
	d2.arm("-- acquire:", 1, nil)
	start := time.Now()
	if err := w.Release(o, 2); err != nil {
		t.Fatal(err)
	}
	within(t, "w2 handed 2 permits", w2Got, start, 2*time.Second)
	if n := d2.dropped.Load(); n != 1 {
		t.Errorf("%d replies of w2 dropped, want 1 (its confirming attempt)", n)
	}
	st, err = w2.State(o2)
	if err != nil || st.Permits != 2 || st.Held != 2 {
		t.Fatalf("after a hand-off whose confirmation was lost: %+v, %v; want 2 held", st, err)
	}
	if err := w2.Release(o2, 2); err != nil {
		t.Fatal(err)
	}
}

// A retried acquisition whose first reply was lost counts its permits
// once.
func TestAmbiguousAcquireCountsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		lb := &loseOnce{Backend: fake.FakeBackend(t, srv)}
		sem := semaphore.New(lb, "amb", 3)
		o := dsync.WithOwner(ctx)
		lb.armed.Store(true)
		if err := sem.Acquire(o, 2); err != nil {
			t.Fatal(err)
		}
		st, err := sem.State(o)
		if err != nil || st.Permits != 2 || st.Held != 2 {
			t.Errorf("after an acquisition retried once = %+v, %v; want 2 permits", st, err)
		}
		if err := sem.Release(o, 2); err != nil {
			t.Fatal(err)
		}
		if k := fakeKeysLeft(srv); len(k) != 0 {
			t.Errorf("keys left: %v", k)
		}
	})
}

// loseOnce runs the next script call once armed, then reports it failed
// with a connection error.
type loseOnce struct {
	backend.Backend
	armed atomic.Bool
}

func (l *loseOnce) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	reply, err := l.Backend.Eval(ctx, s, keys, args...)
	if err == nil && l.armed.CompareAndSwap(true, false) {
		return nil, errNet
	}
	return reply, err
}
