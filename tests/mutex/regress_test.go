package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Regression tests, one per defect. Each names its defect in the comment
// above it and asserts the behaviour the package promises.

// ---- helpers ---------------------------------------------------------------

// regressElsewhere makes a backend act as if in a process of its own (as
// conformance's elsewhere does): scripts that hand the mutex to a waiter
// are told the caller is another process, so they wake the waiter through
// pub/sub, and the caller does not see whom they woke: the reply is cut
// before the waiter's address ("<process>.<n>/<waiter id>", see hub).
type regressElsewhere struct{ backend.Backend }

func (e regressElsewhere) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	args = slices.Clone(args)
	for i, a := range args {
		if id, ok := a.(string); ok && hub.IsID(id) {
			args[i] = "elsewhere"
		}
	}
	reply, err := e.Backend.Eval(ctx, s, keys, args...)
	if a, ok := reply.([]any); ok {
		for i, v := range a {
			if v, ok := v.(string); ok && i > 0 && hub.IsID(strings.SplitN(v, "/", 2)[0]) && strings.Contains(v, "/") {
				reply = a[:i]
				break
			}
		}
	}
	return reply, err
}

// slowWake is a backend whose subscriptions deliver every message delay
// late, as a congested pub/sub path would. Closing stop ends the delays,
// so that no goroutine is left asleep in a synctest bubble.
type slowWake struct {
	backend.Backend
	delay time.Duration
	stop  chan struct{}
}

func (s *slowWake) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	sub, err := s.Backend.Subscribe(ctx, channel)
	if err != nil {
		return nil, err
	}
	return &slowSub{Subscription: sub, delay: s.delay, stop: s.stop}, nil
}

type slowSub struct {
	backend.Subscription
	delay time.Duration
	stop  chan struct{}
}

func (s *slowSub) Receive(ctx context.Context) (backend.Message, error) {
	m, err := s.Subscription.Receive(ctx)
	if err != nil {
		return m, err
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.stop:
	}
	return m, nil
}

// logRecords collects what a logger built by logger() handles.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) logger() *slog.Logger { return slog.New(captureHandler{r: l}) }

// count returns how many records at level or above mention s (in the
// message or an attribute's value); s == "" matches every record.
func (l *logRecords) count(level slog.Level, s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level >= level && strings.Contains(recordText(r), s) {
			n++
		}
	}
	return n
}

func (l *logRecords) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.recs {
		fmt.Fprintf(&b, "\n\t%v %s", r.Level, recordText(r))
	}
	return b.String()
}

func recordText(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	return b.String()
}

type captureHandler struct {
	r     *logRecords
	attrs []slog.Attr
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.r.mu.Lock()
	h.r.recs = append(h.r.recs, r)
	h.r.mu.Unlock()
	return nil
}

func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return captureHandler{r: h.r, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h captureHandler) WithGroup(string) slog.Handler { return h }

// catchPanic runs f and returns what it panicked with, if anything.
func catchPanic(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

func regressName(prefix string) string { return prefix + "-" + dsync.NewID()[:12] }

// ---- 1 ---------------------------------------------------------------------

// TestRegressLateGrantRefused: defect 1, a hand-off wake-up arriving after the handed hold expired and another owner took the mutex is accepted, so two owners hold it.
func TestRegressLateGrantRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "lategrant"
		// The holder's lease is 2.5s, so the waiter's retry timer (the
		// holder's remaining TTL) has it try again at 2.5s.
		holder := mutex.New(regressElsewhere{fake.FakeBackend(t, srv)}, name,
			mutex.WithWatchdog(2500*time.Millisecond), mutex.WithHandoffAfter(0))
		holder.Lock()
		// The waiter is told of the hand-off 3s late.
		wb := &slowWake{Backend: fake.FakeBackend(t, srv), delay: 3 * time.Second, stop: make(chan struct{})}
		t.Cleanup(func() { close(wb.stop) })
		waiter := mutex.New(wb, name, mutex.WithLogger(nil))
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		type result struct {
			err error
			at  time.Time
		}
		got := make(chan result, 1)
		go func() {
			err := waiter.LockContext(wctx)
			got <- result{err, time.Now()}
		}()
		synctest.Wait() // the waiter is registered and asleep
		select {
		case r := <-got:
			t.Fatalf("waiter returned before the release: %v", r.err)
		default:
		}

		start := time.Now()
		holder.Unlock() // handed to the waiter on a 2s lease; wake-up published
		other := mutex.New(fake.FakeBackend(t, srv), name)
		if ttl, err := other.TTL(ctx); err != nil || ttl <= 0 || ttl > 2*time.Second {
			t.Fatalf("TTL right after the release = %v, %v; want the waiter's 2s hand-off hold", ttl, err)
		}
		// The hand-off lease runs out unheard.
		for {
			locked, err := other.IsLocked(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !locked {
				break
			}
			if time.Since(start) > 3*time.Second {
				t.Fatal("the 2s hand-off hold did not expire")
			}
			time.Sleep(10 * time.Millisecond)
		}
		expired := time.Since(start)
		// C takes the free mutex.
		c := mutex.New(fake.FakeBackend(t, srv), name)
		if ok, err := c.TryLockContext(ctx); !ok || err != nil {
			t.Fatalf("C's TryLock on the free mutex: %v, %v", ok, err)
		}
		cTook := time.Since(start)
		// The waiter tries at 2.5s and fails (C holds); the stale wake-up
		// lands at 3s. Wait past it.
		time.Sleep(4*time.Second - time.Since(start))

		var r result
		returned := false
		select {
		case r = <-got:
			returned = true
		default:
		}
		if returned && r.err == nil {
			t.Errorf("waiter's LockContext returned nil %v after the release, while C holds the mutex (hand-off hold expired at %v, C took it at %v): a stale grant was accepted",
				r.at.Sub(start), expired, cTook)
		}
		cReleased := time.Now()
		c.Unlock()
		if !returned {
			r = <-got // bounded by wctx
		}
		if r.err == nil {
			if !returned && r.at.Before(cReleased) { // not reported above
				t.Errorf("waiter acquired %v after the release, before C released at %v", r.at.Sub(start), cReleased.Sub(start))
			}
			waiter.UnlockContext(ctx) // may report the hold lost
		} else {
			t.Logf("waiter: %v (acceptable: it never held the mutex with C)", r.err)
		}
	})
}

// ---- 2 ---------------------------------------------------------------------

// TestRegressUnlockWithEndedContextReleases: defect 2, UnlockContext with an ended ctx returns ctx.Err() before any I/O and the watchdog keeps the hold forever.
func TestRegressUnlockWithEndedContextReleases(t *testing.T) {
	srv := testserver.Real(t)
	for _, tc := range []struct {
		name   string
		cancel bool // cancel the ctx; otherwise its deadline passes
	}{{"cancelled", true}, {"deadline", false}} {
		t.Run(tc.name, func(t *testing.T) {
			name := regressName("endedunlock")
			m := mutex.New(srv.NewBackend(t), name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
			other := mutex.New(srv.NewBackend(t), name)
			ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 300*time.Millisecond)
			defer cancel()
			if err := m.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			live := context.WithoutCancel(ctx) // same owner
			if tc.cancel {
				cancel()
			}
			<-ctx.Done()

			err := m.UnlockContext(ctx)
			t.Logf("UnlockContext with an ended ctx: %v", err)
			locked, lerr := other.IsLocked(context.Background())
			if lerr != nil {
				t.Fatal(lerr)
			}
			if locked {
				t.Errorf("mutex still held on the server after UnlockContext with an ended ctx (it returned %v): the release must not depend on the caller's cancellation", err)
			}
			select {
			case <-m.Done(ctx):
			default:
				t.Errorf("Done(ctx) still open after UnlockContext with an ended ctx (it returned %v): the watchdog keeps renewing the hold", err)
			}
			if locked {
				m.UnlockContext(live) // clean up
			}
		})
	}
}

// ---- 3 ---------------------------------------------------------------------

// vanishOnRelease runs the first 4-key script called after armed is set
// (the release: lock, queue, expiry and fence keys), then deletes the lock key, as ForceUnlock or a flush
// would, and holds the reply for pause.
type vanishOnRelease struct {
	backend.Backend
	srv   *miniredis.Miniredis
	key   string
	pause time.Duration
	armed atomic.Bool
	fired atomic.Bool
}

func (v *vanishOnRelease) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if len(keys) == 4 && v.armed.CompareAndSwap(true, false) {
		reply, err := v.Backend.Eval(ctx, s, keys, args...)
		v.srv.Del(v.key)
		v.fired.Store(true)
		time.Sleep(v.pause)
		return reply, err
	}
	return v.Backend.Eval(ctx, s, keys, args...)
}

// TestRegressHoldVanishedDuringPartialReleaseIsLost: defect 3, a renewal that finds the hold gone while a partial release is in flight drops the lease without reporting the loss.
func TestRegressHoldVanishedDuringPartialReleaseIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		const name = "vanish"
		const lease = 30 * time.Second // the default: renewed every 10s
		b := &vanishOnRelease{Backend: fake.FakeBackend(t, srv), srv: srv,
			key: "dsync:mutex:{" + name + "}", pause: lease/3 + time.Second}
		o := dsync.WithOwner(context.Background())
		m := mutex.New(b, name, mutex.WithLogger(nil))
		for range 2 {
			if err := m.LockContext(o); err != nil {
				t.Fatal(err)
			}
		}
		b.armed.Store(true)
		err := m.UnlockContext(o) // 2 -> 1; the key vanishes; a renewal runs meanwhile
		if !b.fired.Load() {
			t.Fatal("the release was not intercepted")
		}
		t.Logf("partial UnlockContext: %v", err)
		if locked, _ := m.IsLocked(o); locked {
			t.Fatal("the key did not vanish")
		}
		returned := time.Now()
		select {
		case <-m.Done(o):
		case <-time.After(lease/3 + time.Second):
			t.Errorf("Done still open %v after the partial release returned, though a renewal found the hold gone during it: the loss was never reported",
				time.Since(returned))
		}
		if tok, err := m.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("Token = %d, %v; want ErrNotHeld: the hold is gone from the server", tok, err)
		}
		m.UnlockContext(o) // clean up whatever is left
	})
}

// ---- 4 ---------------------------------------------------------------------

// TestRegressUnlockThroughAnotherBackend: defect 4, as the rule now
// stands: a hold belongs to the backend value it was taken through. An
// unlock through another handle of the process on the same server, on a
// backend value of its own, is refused with ErrNotHeld saying so, and
// leaves the hold alive; the first backend value releases it, and its
// watchdog stops.
func TestRegressUnlockThroughAnotherBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "twobackends"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		other := mutex.New(fake.FakeBackend(t, srv), name)
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := m2.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) || !strings.Contains(err.Error(), "another backend value") {
			t.Errorf("m2.UnlockContext(o) = %v, want ErrNotHeld naming the other backend value", err)
		}
		if locked, err := other.IsLocked(ctx); err != nil || !locked {
			t.Errorf("after the refused unlock: locked %v, %v; want held", locked, err)
		}
		time.Sleep(time.Minute) // the watchdog keeps the hold
		select {
		case <-m1.Done(o):
			t.Fatal("m1.Done(o) closed while o holds the mutex")
		default:
		}
		if err := m1.UnlockContext(o); err != nil {
			t.Fatalf("m1.UnlockContext(o) = %v", err)
		}
		select {
		case <-m1.Done(o):
		default:
			t.Errorf("m1.Done(o) still open after the owner released through m1")
		}
		// Long after, the hold is still gone.
		time.Sleep(time.Minute)
		if locked, _ := other.IsLocked(ctx); locked {
			t.Errorf("mutex held a minute after the owner released it")
		}
	})
}

// TestRegressReentryThroughAnotherBackend: defect 4 (reverse), a re-entry through another backend value starts a second lease, and whichever is not released last reports a false loss.
func TestRegressReentryThroughAnotherBackend(t *testing.T) {
	for _, order := range []string{"m1 then m2", "m2 then m1"} {
		t.Run(order, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "reentertwo"
				logs := &logRecords{}
				o := dsync.WithOwner(ctx)
				m1 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(logs.logger()))
				m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(logs.logger()))
				other := mutex.New(fake.FakeBackend(t, srv), name)
				if err := m1.LockContext(o); err != nil {
					t.Fatal(err)
				}
				if err := m2.LockContext(o); err != nil { // re-entry
					t.Fatal(err)
				}
				if n, err := m1.HoldCount(o); err != nil || n != 2 {
					t.Fatalf("HoldCount after re-entry through m2 = %d, %v; want 2", n, err)
				}
				first, second := m1, m2
				if order == "m2 then m1" {
					first, second = m2, m1
				}
				if err := first.UnlockContext(o); err != nil {
					t.Errorf("first UnlockContext: %v", err)
				}
				if err := second.UnlockContext(o); err != nil {
					t.Errorf("second UnlockContext: %v", err)
				}
				if locked, err := other.IsLocked(ctx); err != nil || locked {
					t.Errorf("IsLocked after two unlocks = %v, %v; want free", locked, err)
				}
				for i, m := range []*mutex.Mutex{m1, m2} {
					select {
					case <-m.Done(o):
					default:
						t.Errorf("m%d.Done(o) still open after the owner's final unlock", i+1)
					}
				}
				// Past a renewal interval (and the whole lease): a lease left
				// behind would find the hold gone and report it lost.
				time.Sleep(31 * time.Second)
				if n := logs.count(slog.LevelWarn, "hold lost"); n > 0 {
					t.Errorf("%d \"hold lost\" records after the owner released every hold it took:%v", n, logs)
				}
				m1.UnlockContext(o) // clean up
				m2.UnlockContext(o)
			})
		})
	}
}

// ---- 5 ---------------------------------------------------------------------

// TestRegressLateAnonymousUnlockKeepsNextHold: defect 5, a late ownerless Unlock, for a hold whose lease ran out, releases the next ownerless hold taken through the same handle.
func TestRegressLateAnonymousUnlockKeepsNextHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "lateanon"
		logs := &logRecords{}
		m := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLease(100*time.Millisecond),
			mutex.WithLogger(logs.logger()))
		other := mutex.New(fake.FakeBackend(t, srv), name)

		g1Locked, g1Unlock, g1Done := make(chan struct{}), make(chan struct{}), make(chan any, 1)
		go func() {
			m.Lock()
			close(g1Locked)
			<-g1Unlock
			g1Done <- catchPanic(m.Unlock)
		}()
		<-g1Locked
		<-m.Done(ctx) // G1's fixed lease runs out

		g2Locked, g2Unlock, g2Done := make(chan struct{}), make(chan struct{}), make(chan any, 1)
		go func() {
			m.Lock()
			close(g2Locked)
			<-g2Unlock
			g2Done <- catchPanic(m.Unlock)
		}()
		<-g2Locked

		close(g1Unlock) // G1's late Unlock
		if p := <-g1Done; p != nil {
			t.Errorf("G1's late Unlock panicked: %v", p)
		}
		if logs.count(slog.LevelWarn, name) == 0 {
			t.Errorf("G1's lost hold was not logged")
		}
		locked, err := other.IsLocked(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !locked {
			t.Errorf("mutex free after G1's late Unlock: it released G2's hold")
		}
		close(g2Unlock)
		p := <-g2Done
		if locked {
			if p != nil {
				t.Errorf("G2's Unlock panicked: %v", p)
			}
			if locked, err := other.IsLocked(ctx); err != nil || locked {
				t.Errorf("IsLocked after G2's Unlock = %v, %v; want free", locked, err)
			}
		}
	})
}

// ---- 7 ---------------------------------------------------------------------

// TestRegressForeignValueAtLockKey: defect 7, a value at the lock key that dsync did not write is treated as a free mutex and overwritten (or, of the wrong type, fails with a bare server error).
func TestRegressForeignValueAtLockKey(t *testing.T) {
	srv := testserver.Real(t)
	for _, kind := range []struct {
		name        string
		write, read func(key string) []any // commands writing and reading back the foreign value
	}{
		{"string",
			func(key string) []any { return []any{"SET", key, "hello"} },
			func(key string) []any { return []any{"GET", key} }},
		{"hash",
			func(key string) []any { return []any{"HSET", key, "field", "hello"} },
			func(key string) []any { return []any{"HGET", key, "field"} }},
	} {
		for _, op := range []string{"LockContext", "TryLockContext"} {
			t.Run(kind.name+"/"+op, func(t *testing.T) {
				bg := context.Background()
				name := regressName("foreign")
				key := "dsync:mutex:{" + name + "}"
				t.Cleanup(func() { srv.Do(bg, "DEL", key, key+":waiters", key+":fence") })
				do := func(cmd []any) (any, error) { return srv.Do(bg, cmd[0].(string), cmd[1:]...) }
				if _, err := do(kind.write(key)); err != nil {
					t.Fatal(err)
				}
				m := mutex.New(srv.NewBackend(t), name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
				ctx, cancel := context.WithTimeout(bg, 5*time.Second)
				defer cancel()
				start := time.Now()
				var err error
				acquired := false
				if op == "LockContext" {
					err = m.LockContext(ctx)
					acquired = err == nil
				} else {
					acquired, err = m.TryLockContext(ctx)
				}
				took := time.Since(start)
				switch {
				case acquired:
					t.Errorf("%s acquired a mutex whose key holds a %s dsync did not write", op, kind.name)
					m.UnlockContext(bg)
				case err == nil:
					t.Errorf("%s = false, nil; want an error matching ErrUnexpectedReply", op)
				case !errors.Is(err, dsync.ErrUnexpectedReply):
					t.Errorf("%s error %q does not match dsync.ErrUnexpectedReply", op, err)
				}
				if took > time.Second || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s took %v (%v): want a prompt error, not a wait", op, took, err)
				}
				v, rerr := redis.String(do(kind.read(key)))
				if rerr != nil || v != "hello" {
					t.Errorf("key %s after %s: %q, %v; want the foreign %s \"hello\" untouched", key, op, v, rerr, kind.name)
				}
			})
		}
	}
}

// ---- 8 ---------------------------------------------------------------------

// boomFirst is a backend whose first subscription fails, Receive
// returning an error that is not a close, once boom is closed. Closing
// stop ends it as a close would, so that no goroutine is left blocked in
// a synctest bubble.
type boomFirst struct {
	backend.Backend
	boom, stop chan struct{}
	subs       atomic.Int32
}

func (b *boomFirst) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	s, err := b.Backend.Subscribe(ctx, channel)
	if err != nil || b.subs.Add(1) != 1 {
		return s, err
	}
	return &boomSub{Subscription: s, boom: b.boom, stop: b.stop, closed: make(chan struct{})}, nil
}

type boomSub struct {
	backend.Subscription
	boom, stop chan struct{}
	closed     chan struct{}
	once       sync.Once
}

func (s *boomSub) Receive(ctx context.Context) (backend.Message, error) {
	select {
	case <-s.boom:
		return backend.Message{}, errors.New("boom")
	case <-s.closed:
		return backend.Message{}, dsync.ErrClosed
	case <-s.stop:
		return backend.Message{}, dsync.ErrClosed
	case <-ctx.Done():
		return backend.Message{}, ctx.Err()
	}
}

func (s *boomSub) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.Subscription.Close()
}

// TestRegressWaiterReattachesAfterSubscriptionError: defect 8, when the hub's subscription ends with an error its waiters stay on the dead topic and hear of a release only at their 5s heartbeat.
func TestRegressWaiterReattachesAfterSubscriptionError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "boom"
		holder := mutex.New(fake.FakeBackend(t, srv), name)
		holder.Lock()
		wb := &boomFirst{Backend: fake.FakeBackend(t, srv), boom: make(chan struct{}), stop: make(chan struct{})}
		t.Cleanup(func() { close(wb.stop) })
		waiter := mutex.New(wb, name)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got := make(chan error, 1)
		go func() { got <- waiter.LockContext(wctx) }()
		synctest.Wait() // the waiter is registered and asleep
		select {
		case err := <-got:
			t.Fatalf("waiter returned before the release: %v", err)
		default:
		}
		if wb.subs.Load() != 1 {
			t.Fatalf("waiter made %d subscriptions, want 1", wb.subs.Load())
		}
		close(wb.boom) // the subscription fails
		synctest.Wait()
		released := time.Now()
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > 100*time.Millisecond {
			t.Errorf("waiter acquired %v after the release; want within 100ms, not at its 5s heartbeat: it stayed on the dead subscription", d)
		}
		waiter.Unlock()
	})
}

// ---- 9 ---------------------------------------------------------------------

// TestRegressUnreachableServerIsLogged: defect 9, LockContext against an unreachable server retries silently.
func TestRegressUnreachableServerIsLogged(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	pool := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, "tcp", addr)
	}}
	b := bredigo.New(pool)
	defer pool.Close()
	defer b.Close()
	logs := &logRecords{}
	name := regressName("unreachable")
	m := mutex.New(b, name, mutex.WithLogger(logs.logger()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.LockContext(ctx); err == nil {
		t.Fatal("LockContext on an unreachable server succeeded")
	} else {
		t.Logf("LockContext: %v", err)
	}
	warns, all := logs.count(slog.LevelWarn, name), logs.count(slog.LevelWarn, "")
	if warns == 0 {
		t.Errorf("no Warn record naming %q in 2s of failed attempts on an unreachable server; logged:%v", name, logs)
	}
	if all > 3 {
		t.Errorf("%d Warn records in 2s: want the warning rate-limited (once, then rarely):%v", all, logs)
	}
}

// ---- 10 --------------------------------------------------------------------

// TestRegressContextErrorsNameOperation: defect 10, an ended ctx makes LockContext, TryLockContext and State return a bare ctx.Err() that names neither the operation nor the mutex.
func TestRegressContextErrorsNameOperation(t *testing.T) {
	b := fake.Mini(t).NewBackend(t)
	name := regressName("ctxerr")
	m := mutex.New(b, name)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"cancelled", cancelled}, {"expired", expired}} {
		for _, op := range []struct {
			name, word string // word: what the message must contain
			call       func(context.Context) error
		}{
			{"LockContext", "lock", m.LockContext},
			{"TryLockContext", "try", func(ctx context.Context) error { _, err := m.TryLockContext(ctx); return err }},
			{"State", "state", func(ctx context.Context) error { _, err := m.State(ctx); return err }},
		} {
			t.Run(c.name+"/"+op.name, func(t *testing.T) {
				err := op.call(c.ctx)
				if !errors.Is(err, c.ctx.Err()) {
					t.Errorf("%s error %v does not match %v", op.name, err, c.ctx.Err())
				}
				if err == nil {
					return
				}
				msg := err.Error()
				if !strings.Contains(msg, name) || !strings.Contains(strings.ToLower(msg), op.word) {
					t.Errorf("%s error %q must name the operation (%q) and the mutex (%q)", op.name, msg, op.word, name)
				}
			})
		}
	}
}
