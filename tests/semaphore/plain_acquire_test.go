package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// A lone holder takes a free semaphore with one plain SET NX of its state
// key, sent by the client, and gives it back with the release script's
// compare-and-delete: the pair is four server commands, as the mutex's
// (SET, EVALSHA, GET, DEL). That is only right because a missing state key
// says that nobody waits and no capacity is set at runtime; the tests
// after this one pin that.

// ownServer starts a redis-server for the test alone, so that nothing but
// the test runs commands on it.
func ownServer(t *testing.T) *testserver.Server {
	t.Helper()
	testserver.Real(t) // skips without redis-server
	srv, err := testserver.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func TestUncontendedPairCommands(t *testing.T) {
	srv := ownServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, owned := range []bool{false, true} {
		name := "pairs-" + dsync.NewID()[:8]
		sem := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLogger(nil))
		actx := ctx
		if owned {
			actx = dsync.WithOwner(ctx)
		}
		// The first pair loads the release script.
		if err := sem.Acquire(actx, 1); err != nil {
			t.Fatal(err)
		}
		if err := sem.Release(actx, 1); err != nil {
			t.Fatal(err)
		}
		const pairs = 100
		// Pub/sub's own commands (a session's SUBSCRIBE of its wake
		// channel, on its own schedule) are not the pair's.
		calls, total, err := srv.FewestCalls(ctx, 1, func() {
			for range pairs {
				if err := sem.Acquire(actx, 1); err != nil {
					t.Fatal(err)
				}
				if err := sem.Release(actx, 1); err != nil {
					t.Fatal(err)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		var by []string
		for c, d := range calls {
			by = append(by, fmt.Sprintf("%s %.2f", c, float64(d)/pairs))
		}
		slices.Sort(by)
		t.Logf("owner %v: %.2f commands per Acquire(1)+Release(1): %s", owned, float64(total)/pairs, strings.Join(by, ", "))
		if total > 4*pairs {
			t.Errorf("owner %v: %d commands for %d uncontended pairs on capacity 4, want at most 4 per pair: %s",
				owned, total, pairs, strings.Join(by, ", "))
		}
		if left := keysLeft(t, ctx, srv, "dsync:semaphore:{"+name+"}*"); len(left) > 0 {
			t.Errorf("owner %v: keys left by uncontended pairs: %v", owned, left)
		}
	}
}

// TestPlainAcquireWaitsBehindQueueAfterHoldersDied: the only holder's
// lease runs out while a live waiter is queued whose next attempt is late
// (held back, as by a slow network): a newcomer's plain SET NX must not
// take the permits ahead of it. The state outlives the waiter's entry, so
// the newcomer's SET NX fails, and its script serves the waiter first;
// also when the state was kept for a capacity set at runtime, which was
// cleared while the waiter was queued.
func TestPlainAcquireWaitsBehindQueueAfterHoldersDied(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		asks    int64
		cleared bool
	}{{4, false}, {1, false}, {4, true}} {
		what := fmt.Sprintf("asks %d, runtime capacity cleared %v", c.asks, c.cleared)
		name := "behind-" + dsync.NewID()[:8]
		const leaseD = time.Second
		holder := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLease(leaseD), semaphore.WithLogger(nil))
		gated := fake.NewGated(t, srv.NewBackend(t))
		w := semaphore.New(gated, name, 4, semaphore.WithWaiterTimeout(5*time.Second), semaphore.WithLogger(nil))
		probe := semaphore.New(srv.NewBackend(t), name, 4)
		if c.cleared {
			if err := probe.SetCapacity(ctx, 4); err != nil {
				t.Fatal(err)
			}
		}
		if err := holder.Acquire(ctx, 4); err != nil { // never given back
			t.Fatal(err)
		}
		got := acquire(ctx, w, c.asks) // ownerless: a hand-off needs no attempt to confirm it
		awaitState(t, ctx, probe, "the waiter queued", func(st semaphore.State) bool { return st.Queued == 1 })
		gated.HoldEvals() // its attempt at the lease's end is late
		if c.cleared {
			if err := probe.SetCapacity(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		// Past the end of the holder's lease, on the server's clock, by
		// more than the ms a key's expiry may be rounded to.
		end, err := redis.Strings(srv.Do(ctx, "ZRANGE", "dsync:semaphore:{"+name+"}:holders", 0, 0, "WITHSCORES"))
		if err != nil || len(end) != 2 {
			t.Fatalf("%s: the holder's lease on the server: %v, %v", what, end, err)
		}
		endMs, err := strconv.ParseInt(end[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		awaitServerTime(t, ctx, srv, endMs+5)
		awaitState(t, ctx, probe, "the holder's lease over", func(st semaphore.State) bool { return st.Held == 0 && st.Queued == 1 })

		newcomer := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLogger(nil))
		ok, err := newcomer.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		st, err := probe.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.asks == 4 && ok {
			t.Errorf("%s: a newcomer's TryAcquire(1) succeeded ahead of a live waiter for 4, after the only holder's lease ran out (%+v)", what, st)
		}
		if st.Queued != 0 || st.Held != c.asks+map[bool]int64{true: 1}[ok] {
			t.Errorf("%s: after a newcomer's TryAcquire(1) = %v: %+v; want the waiter served first, nobody queued", what, ok, st)
		}
		gated.OpenEvals()
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("%s: the waiter: %v", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the waiter not served 5s after the holder's lease ran out", what)
		}
		if err := w.Release(ctx, c.asks); err != nil {
			t.Error(err)
		}
		if ok {
			if err := newcomer.Release(ctx, 1); err != nil {
				t.Error(err)
			}
		}
		if left := keysLeft(t, ctx, srv, "dsync:semaphore:{"+name+"}*"); len(left) > 0 {
			t.Errorf("%s: keys left once every permit is back: %v", what, left)
		}
	}
}

// awaitServerTime waits until the server's clock reads ms or later.
func awaitServerTime(t *testing.T, ctx context.Context, srv *testserver.Server, ms int64) {
	t.Helper()
	for i := 0; ; i++ {
		now, err := redis.Int64s(srv.Do(ctx, "TIME"))
		if err != nil || len(now) != 2 {
			t.Fatalf("TIME: %v, %v", now, err)
		}
		left := ms - (now[0]*1000 + now[1]/1000)
		if left < 0 {
			return
		}
		if i == 100 {
			t.Fatalf("the server's clock still %dms short of %d", left, ms)
		}
		time.Sleep(time.Duration(left+1) * time.Millisecond)
	}
}

// TestPlainAcquireObeysLoweredCapacity: a capacity set at runtime below a
// handle's is kept by the state, which a plain SET NX cannot pass: on a
// free semaphore, and after the holder it was set under lost its lease.
// Clearing it deletes a free state, and gives one in use an expiry again.
func TestPlainAcquireObeysLoweredCapacity(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := func(name string) string { return "dsync:semaphore:{" + name + "}" }

	// Set on a free semaphore.
	name := "lowered-" + dsync.NewID()[:8]
	sem := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLogger(nil))
	if err := sem.SetCapacity(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := sem.TryAcquire(ctx, 2); ok || !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("TryAcquire(2) with a capacity of 1 set on a free semaphore = %v, %v; want ErrInvalidPermits", ok, err)
	}
	if ok, err := sem.TryAcquire(ctx, 1); !ok || err != nil {
		t.Fatalf("TryAcquire(1) with a capacity of 1 set = %v, %v", ok, err)
	}
	if ok, err := semaphore.New(srv.NewBackend(t), name, 4).TryAcquire(ctx, 1); ok || err != nil {
		t.Errorf("a second TryAcquire(1) with a capacity of 1 set = %v, %v; want false", ok, err)
	}
	if err := sem.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Free, with a capacity set: the state stays, without expiry.
	if pttl, err := redis.Int64(srv.Do(ctx, "PTTL", key(name))); err != nil || pttl != -1 {
		t.Errorf("the state of a free semaphore with a capacity set: PTTL %d, %v; want -1 (kept)", pttl, err)
	}
	if err := sem.SetCapacity(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if left := keysLeft(t, ctx, srv, key(name)+"*"); len(left) > 0 {
		t.Errorf("keys left by a free semaphore once its capacity was cleared: %v", left)
	}

	// Set under a plain holder, whose lease then runs out.
	name = "lowered-" + dsync.NewID()[:8]
	const leaseD = 300 * time.Millisecond
	holder := semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLease(leaseD), semaphore.WithLogger(nil))
	sem = semaphore.New(srv.NewBackend(t), name, 4, semaphore.WithLogger(nil))
	if err := holder.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := sem.SetCapacity(ctx, 1); err != nil {
		t.Fatal(err)
	}
	awaitState(t, ctx, sem, "the holder's lease over", func(st semaphore.State) bool { return st.Held == 0 })
	if ok, err := sem.TryAcquire(ctx, 2); ok || !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("TryAcquire(2) with a capacity of 1 set, once the holder's lease ran out = %v, %v; want ErrInvalidPermits", ok, err)
	}
	o := dsync.WithOwner(ctx)
	if ok, err := sem.TryAcquire(o, 1); !ok || err != nil {
		t.Fatalf("TryAcquire(1) with a capacity of 1 set, once the holder's lease ran out = %v, %v", ok, err)
	}
	if ok, err := semaphore.New(srv.NewBackend(t), name, 4).TryAcquire(ctx, 1); ok || err != nil {
		t.Errorf("a second TryAcquire(1) with a capacity of 1 set = %v, %v; want false", ok, err)
	}
	// Cleared while held: the state expires with the holder's lease again.
	if err := sem.SetCapacity(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if pttl, err := redis.Int64(srv.Do(ctx, "PTTL", key(name))); err != nil || pttl <= 0 || pttl > 30_000 {
		t.Errorf("the state in use once its capacity was cleared: PTTL %d, %v; want the holder's lease, 30s at most", pttl, err)
	}
	if err := sem.Release(o, 1); err != nil {
		t.Fatal(err)
	}
	if left := keysLeft(t, ctx, srv, key(name)+"*"); len(left) > 0 {
		t.Errorf("keys left once every permit is back: %v", left)
	}
}

// TestSharedAcquisitionsAskTheScriptFirst: a handle whose acquisitions
// join another owner's permits finds the state there every time; after
// its first SET NX failed, it asks the script at once, and keeps doing so
// while the script finds the semaphore shared: one call per acquisition,
// not a SET NX that fails and the script.
func TestSharedAcquisitionsAskTheScriptFirst(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, owned := range []bool{false, true} {
		name := "shared-" + dsync.NewID()[:8]
		other := semaphore.New(srv.NewBackend(t), name, 4)
		oo := dsync.WithOwner(ctx)
		if err := other.Acquire(oo, 1); err != nil {
			t.Fatal(err)
		}
		c := &testserver.SetterCounting{Backend: srv.NewBackend(t)}
		sem := semaphore.New(c, name, 4)
		actx := ctx
		if owned {
			actx = dsync.WithOwner(ctx)
		}
		const n = 10
		var calls int64
		for i := range n {
			before := c.Evals.Load() + c.Sets.Load()
			if err := sem.Acquire(actx, 1); err != nil {
				t.Fatal(err)
			}
			calls += c.Evals.Load() + c.Sets.Load() - before
			if err := sem.Release(actx, 1); err != nil {
				t.Fatal(err)
			}
			if i == 0 && c.Sets.Load() != 1 {
				t.Fatalf("owner %v: the first acquisition sent %d SET NX, want 1", owned, c.Sets.Load())
			}
		}
		if calls > n+1 {
			t.Errorf("owner %v: %d acquisitions joining another owner's permits made %d calls (%d SET NX), want at most %d",
				owned, n, calls, c.Sets.Load(), n+1)
		}
		if err := other.Release(oo, 1); err != nil {
			t.Fatal(err)
		}
		// Free again: the script's plain reply lets the next one try the
		// SET NX first again.
		for i := range 3 {
			sets := c.Sets.Load()
			if err := sem.Acquire(actx, 1); err != nil {
				t.Fatal(err)
			}
			if err := sem.Release(actx, 1); err != nil {
				t.Fatal(err)
			}
			if i > 0 && c.Sets.Load() != sets+1 {
				t.Errorf("owner %v: acquisition %d on a free semaphore, after one the script found free, sent no SET NX", owned, i+1)
			}
		}
	}
}

// losesSet runs every SET NX, and loses the reply of the next lose ones
// that set their key, as a timeout after the server ran it would.
type losesSet struct {
	backend.Backend
	lose atomic.Int64
}

func (l *losesSet) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	ok, err := l.Backend.(backend.Setter).SetNX(ctx, key, value, ttl)
	if err == nil && ok && l.lose.Add(-1) >= 0 {
		return false, errNet
	}
	return ok, err
}

// TestPlainSetReplyLost: a plain SET NX that took the semaphore, its reply
// lost: an Acquire's next attempt, the script's, finds the plain form of
// its own acquisition and holds it once, as a retry; a TryAcquire fails
// and its abandon gives it back; a portable permit is acquired once and
// released by its id. Nothing is left held or on the server.
func TestPlainSetReplyLost(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "lostset-" + dsync.NewID()[:8]
	b := &losesSet{Backend: srv.NewBackend(t)}
	sem := semaphore.New(b, name, 4, semaphore.WithLogger(nil))
	probe := semaphore.New(srv.NewBackend(t), name, 4)
	free := func(what string) {
		t.Helper()
		if st, err := probe.State(ctx); err != nil || st.Held != 0 || st.Holders != 0 {
			t.Errorf("%s: %+v, %v; want nothing held", what, st, err)
		}
		if left := keysLeft(t, ctx, srv, "dsync:semaphore:{"+name+"}*"); len(left) > 0 {
			t.Errorf("%s: keys left: %v", what, left)
		}
	}

	for _, owned := range []bool{true, false} {
		actx := ctx
		if owned {
			actx = dsync.WithOwner(ctx)
		}
		b.lose.Store(1)
		if err := sem.Acquire(actx, 1); err != nil {
			t.Fatalf("owner %v: Acquire after a lost SET NX reply: %v", owned, err)
		}
		if b.lose.Load() > 0 {
			t.Fatalf("owner %v: no SET NX took the semaphore", owned)
		}
		if st, err := probe.State(ctx); err != nil || st.Held != 1 || st.Holders != 1 {
			t.Errorf("owner %v: after an Acquire(1) whose SET NX reply was lost: %+v, %v; want 1 held", owned, st, err)
		}
		if err := sem.Release(actx, 1); err != nil {
			t.Errorf("owner %v: Release: %v", owned, err)
		}
		if err := sem.Release(actx, 1); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("owner %v: a second Release(1) = %v, want ErrNotHeld", owned, err)
		}
		free(fmt.Sprintf("owner %v, once released", owned))
	}

	b.lose.Store(1)
	if ok, err := sem.TryAcquire(ctx, 1); ok || err == nil || b.lose.Load() > 0 {
		t.Errorf("TryAcquire whose SET NX reply was lost = %v, %v; want the error", ok, err)
	}
	free("after a TryAcquire whose SET NX reply was lost")

	b.lose.Store(1)
	p, err := sem.AcquirePermit(ctx)
	if err != nil || b.lose.Load() > 0 {
		t.Fatalf("AcquirePermit after a lost SET NX reply: %v (SET NX replies left to lose: %d)", err, b.lose.Load())
	}
	if st, err := probe.State(ctx); err != nil || st.Held != 1 {
		t.Errorf("after an AcquirePermit whose SET NX reply was lost: %+v, %v; want 1 held", st, err)
	}
	if err := sem.ReleasePermit(ctx, p.ID); err != nil {
		t.Errorf("ReleasePermit: %v", err)
	}
	free("once the permit was released")
}
