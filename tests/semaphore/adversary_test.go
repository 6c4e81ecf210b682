package semaphore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Black-box adversarial tests of package semaphore: wake-ups late, lost or
// cut off with their connection, contexts that end, other backend values,
// foreign keys, a flushed script cache.

// elsewhere makes a backend act as if in a process of its own: scripts
// that hand permits to waiters are told the caller is another process, so
// they wake the waiters through pub/sub, and the caller does not see whom.
type elsewhere struct{ backend.Backend }

func (e elsewhere) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	args = slices.Clone(args)
	for i, a := range args {
		if id, ok := a.(string); ok && hub.IsID(id) {
			args[i] = "elsewhere"
		}
	}
	reply, err := e.Backend.Eval(ctx, s, keys, args...)
	if a, ok := reply.([]any); ok && len(a) >= 5 {
		_, id := a[1].(string) // a hand-off reply, not an acquisition's
		if _, address := a[2].(string); id && address {
			reply = a[:2]
		}
	}
	return reply, err
}

// muffled delays (or, with a negative delay, drops) every pub/sub message
// its subscriptions receive, gaps aside.
type muffled struct {
	backend.Backend
	delay time.Duration
}

func (m muffled) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	sub, err := m.Backend.Subscribe(ctx, channel)
	if err != nil {
		return nil, err
	}
	return &muffledSub{sub, m.delay}, nil
}

type muffledSub struct {
	backend.Subscription
	delay time.Duration
}

func (s *muffledSub) Receive(ctx context.Context) (backend.Message, error) {
	for {
		m, err := s.Subscription.Receive(ctx)
		if err != nil || m.Gap {
			return m, err
		}
		if s.delay < 0 {
			continue
		}
		time.Sleep(s.delay)
		return m, nil
	}
}

// queued waits, in a synctest bubble, until every goroutine is blocked, and
// checks that the acquisition reporting on got has not returned.
func queued(t *testing.T, got <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned at once: %v", err)
	default:
	}
}

func acquire(ctx context.Context, s *semaphore.Semaphore, n int64) <-chan error {
	got := make(chan error, 1)
	go func() { got <- s.Acquire(ctx, n) }()
	return got
}

// A wake-up that arrives after the permits it carried expired (the waiter
// took longer than the hand-off lease to hear it) is refused: the waiter
// does not believe it holds permits that another waiter took since.
func TestAdvLateWakeUpRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		open := func(b backend.Backend, opts ...semaphore.Option) *semaphore.Semaphore {
			return semaphore.New(b, "late", 1, append(opts, semaphore.WithLogger(nil))...)
		}
		holder := open(elsewhere{fake.FakeBackend(t, srv)})
		if err := holder.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// W hears its wake-ups 3s late, past the 2s hand-off lease, and
		// beats only every 10s.
		w := open(muffled{fake.FakeBackend(t, srv), 3 * time.Second}, semaphore.WithWaiterTimeout(30*time.Second))
		wGot := acquire(ctx, w, 1)
		queued(t, wGot)
		x := open(fake.FakeBackend(t, srv))
		xGot := acquire(ctx, x, 1)
		queued(t, xGot)
		if err := holder.Release(ctx, 1); err != nil { // handed to W, for 2s
			t.Fatal(err)
		}
		select {
		case err := <-xGot: // when W's hand-off lease ran out
			if err != nil {
				t.Fatal(err)
			}
		case err := <-wGot:
			t.Fatalf("W acquired before X with its wake-up 3s late: %v", err)
		}
		xHeld := time.Now()
		time.Sleep(5 * time.Second) // W's late wake-up arrives meanwhile
		select {
		case err := <-wGot:
			t.Fatalf("W acquired (%v) %v into X's hold of the only permit: its late wake-up was taken as current", err, time.Since(xHeld))
		default:
		}
		if err := x.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := <-wGot; err != nil {
			t.Fatal(err)
		}
		if err := w.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		if k := fakeKeysLeft(srv); len(k) != 0 {
			t.Errorf("keys left: %v", k)
		}
	})
}

// A wake-up that never arrives costs the waiter at most a heartbeat: its
// next attempt finds the permits handed to it.
func TestAdvLostWakeUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const timeout = 3 * time.Second // a heartbeat every second
		holder := semaphore.New(elsewhere{fake.FakeBackend(t, srv)}, "lost", 2)
		if err := holder.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		w := semaphore.New(muffled{fake.FakeBackend(t, srv), -1}, "lost", 2, semaphore.WithWaiterTimeout(timeout))
		got := acquire(ctx, w, 2)
		queued(t, got)
		released := time.Now()
		if err := holder.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > timeout/3 {
			t.Errorf("a waiter whose wake-up was lost acquired %v after the release; want within a heartbeat, %v", d, timeout/3)
		}
		st, err := w.State(ctx)
		if err != nil || st.Permits != 2 || st.Held != 2 {
			t.Errorf("state = %+v, %v; want the waiter's 2 permits", st, err)
		}
		if err := w.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
	})
}

// An expired ctx fails before any I/O; one that expires while waiting
// leaves the queue and nothing acquired.
func TestAdvExpiredContext(t *testing.T) {
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

type counting struct {
	backend.Backend
	calls *atomic.Int64
}

func (c counting) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.calls.Add(1)
	return c.Backend.Eval(ctx, s, keys, args...)
}

// An owner's permits belong to the owner and to the backend value they
// were taken through: a handle on another backend value of the same
// server reports them (State asks the server) but cannot release them,
// which ErrNotHeld says, and changes nothing; the first handle's releases
// do, and the holder's Done closes with the last.
func TestAdvSecondBackendValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		o := dsync.WithOwner(ctx)
		s1 := semaphore.New(fake.FakeBackend(t, srv), "two", 3)
		s2 := semaphore.New(fake.FakeBackend(t, srv), "two", 3)
		if err := s1.Acquire(o, 2); err != nil {
			t.Fatal(err)
		}
		done := s1.Done(o)
		if st, err := s2.State(o); err != nil || st.Permits != 2 {
			t.Errorf("State through the second handle = %+v, %v; want the owner's 2 permits", st, err)
		}
		if err := s2.Release(o, 1); !errors.Is(err, dsync.ErrNotHeld) || !strings.Contains(err.Error(), "another backend value") {
			t.Fatalf("Release through the second backend value = %v, want ErrNotHeld naming the other backend value", err)
		}
		if st, err := s2.State(o); err != nil || st.Permits != 2 {
			t.Errorf("after the refused release = %+v, %v; want the owner's 2 permits", st, err)
		}
		if err := s1.Release(o, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			t.Fatal("Done closed with a permit left")
		default:
		}
		if err := s1.Release(o, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		default:
			t.Error("Done open after the last permit was released")
		}
		if err := s1.Release(o, 1); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("a third release = %v, want ErrNotHeld", err)
		}
	})
}

// A retried acquisition whose first reply was lost counts its permits
// once.
func TestAdvAmbiguousAcquire(t *testing.T) {
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

var errNet = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")

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

// TryAcquire does not pass a queued waiter, even when its permits are
// free: a waiter for 3 of 3, behind a holder of 2, keeps the last permit
// from everybody.
func TestAdvTryAcquireDoesNotPassQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := semaphore.New(fake.FakeBackend(t, srv), "try", 3)
		if err := holder.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		big := semaphore.New(fake.FakeBackend(t, srv), "try", 3)
		got := acquire(ctx, big, 3)
		queued(t, got)
		small := semaphore.New(fake.FakeBackend(t, srv), "try", 3)
		if ok, err := small.TryAcquire(ctx, 1); ok || err != nil {
			t.Errorf("TryAcquire(1) past a queued Acquire(3) = %v, %v; want false", ok, err)
		}
		sgot := acquire(ctx, small, 1)
		queued(t, sgot)
		if err := holder.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		queued(t, sgot)
		if err := big.Release(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if err := <-sgot; err != nil {
			t.Fatal(err)
		}
		small.Release(ctx, 1)
	})
}

// A key of the semaphore holding something dsync did not write is
// reported as ErrUnexpectedReply, and left as it is.
func TestAdvForeignKeys(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct{ suffix, cmd, arg string }{
		{"", "SET", "hello"},
		{"", "HSET", "field"},
		{":holders", "LPUSH", "x"},
		{":capacity", "SET", "many"},
		{":queue", "SET", "x"},
	} {
		name := "foreign-" + dsync.NewID()[:8]
		key := "dsync:semaphore:{" + name + "}" + c.suffix
		args := []any{key, c.arg}
		if c.cmd == "HSET" {
			args = append(args, "v")
		}
		if _, err := srv.Do(ctx, c.cmd, args...); err != nil {
			t.Fatal(err)
		}
		sem := semaphore.New(srv.NewBackend(t), name, 2, semaphore.WithLogger(nil))
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		err := sem.Acquire(wctx, 1)
		wcancel()
		if !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("%s %s: Acquire = %v; want ErrUnexpectedReply", c.cmd, key, err)
		}
		if c.suffix != ":queue" { // the queue is read only by waiters
			if _, err := sem.State(ctx); !errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("%s %s: State = %v; want ErrUnexpectedReply", c.cmd, key, err)
			}
		}
		typ, _ := srv.Do(ctx, "TYPE", key)
		if want := map[string]string{"SET": "string", "HSET": "hash", "LPUSH": "list"}[c.cmd]; typ != want {
			t.Errorf("%s %s: the key is now a %v", c.cmd, key, typ)
		}
		srv.Do(ctx, "DEL", key, "dsync:semaphore:{"+name+"}", "dsync:semaphore:{"+name+"}:holders")
	}
}

// A flushed script cache (a restart, a failover) is invisible: renewals,
// waiters and releases carry on.
func TestAdvScriptFlush(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "flush-" + dsync.NewID()[:8]
	holder := semaphore.New(srv.NewBackend(t), name, 1, semaphore.WithWatchdog(300*time.Millisecond))
	if err := holder.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	done := holder.Done(ctx)
	w := semaphore.New(srv.NewBackend(t), name, 1)
	got := acquire(ctx, w, 1)
	for i := 0; ; i++ {
		st, err := holder.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued == 1 {
			break
		}
		if i > 5000 {
			t.Fatal("waiter not queued")
		}
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		if err := srv.FlushScripts(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			t.Fatal("the holder lost its permit after SCRIPT FLUSH")
		case err := <-got:
			t.Fatalf("the waiter acquired a held permit: %v", err)
		case <-time.After(300 * time.Millisecond): // a renewal
		}
	}
	released := time.Now()
	if err := holder.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	t.Logf("waiter acquired %v after the release", time.Since(released))
	if err := w.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// A waiter whose pub/sub connection is killed still hears the release:
// the adapter's gap wakes it, and its attempt finds the permits.
func TestAdvKilledPubSub(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "killsub-" + dsync.NewID()[:8]
	holder := semaphore.New(elsewhere{srv.NewBackend(t)}, name, 2)
	for round := range 2 {
		if err := holder.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		w := semaphore.New(srv.NewBackend(t), name, 2, semaphore.WithWaiterTimeout(time.Minute))
		got := acquire(ctx, w, 2)
		for i := 0; ; i++ {
			st, err := holder.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Queued == 1 {
				break
			}
			if i > 5000 {
				t.Fatal("waiter not queued")
			}
			time.Sleep(time.Millisecond)
		}
		if err := srv.KillPubSub(ctx); err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			time.Sleep(200 * time.Millisecond) // resubscribed before the release
		}
		released := time.Now()
		if err := holder.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the waiter did not acquire within 5s of the release (its heartbeat is 20s)", round)
		}
		t.Logf("round %d: waiter acquired %v after the release", round, time.Since(released))
		if err := w.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
}

// An owner that holds permits and waits for more is handed them by a
// release, local or through pub/sub: they join its one hold, which keeps
// its id and lease, and one release gives all back.
func TestAdvHandOffToHoldingOwner(t *testing.T) {
	for _, remote := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			srv := fake.Fake(t)
			ctx := context.Background()
			var xb backend.Backend = fake.FakeBackend(t, srv)
			if remote {
				xb = elsewhere{xb}
			}
			x := semaphore.New(xb, "more", 2)
			if err := x.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			o := dsync.WithOwner(ctx)
			s := semaphore.New(fake.FakeBackend(t, srv), "more", 2, semaphore.WithWatchdog(3*time.Second))
			if err := s.Acquire(o, 1); err != nil {
				t.Fatal(err)
			}
			done := s.Done(o)
			got := acquire(o, s, 1)
			queued(t, got)
			if err := x.Release(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			if st, err := s.State(o); err != nil || st.Permits != 2 || st.Holders != 1 {
				t.Errorf("remote %v: after the hand-off: %+v, %v; want the owner's 2 permits in one hold", remote, st, err)
			}
			time.Sleep(time.Minute) // renewals find the one hold
			select {
			case <-done:
				t.Fatalf("remote %v: the owner's hold was lost after permits were added to it", remote)
			default:
			}
			if err := s.Release(o, 2); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			default:
				t.Errorf("remote %v: Done open after all permits were given back", remote)
			}
			if k := fakeKeysLeft(srv); len(k) != 0 {
				t.Errorf("keys left: %v", k)
			}
		})
	}
}
