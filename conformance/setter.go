package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/wait"
)

// The cases of backend.Setter, an optional extension: they skip on a
// backend that does not implement it.

var getTTLScript = backend.NewScript(`-- KEYS: one. Reply: {its value or nil, its PTTL}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}`)

func (s *suite) setterRules() []rule {
	return []rule{
		{"SetNXSetsWithExpiry", "SetNX sets an absent key to its value with the expiry asked (SET NX PX) and reports true; on a key that exists it reports false and changes nothing", false, s.testSetNX},
		{"SetNXInvalidTTL", "SetNX with a ttl of zero or less fails with an error matching dsync.ErrInvalidLease and sets nothing", false, s.testSetNXInvalidTTL},
		{"SetNXOneWinner", "of many SetNX of one key at once, through two backends, exactly one reports true", false, s.testSetNXOneWinner},
		{"SetNXContext", "SetNX with a context that ended fails with its error; one whose context ends while the server is busy returns by then", true, s.testSetNXContext},
		{"SetNXClosed", "SetNX on a closed backend fails with ErrClosed", false, s.testSetNXClosed},
	}
}

// setter returns b as a backend.Setter, or skips t.
func setter(t *testing.T, b backend.Backend) backend.Setter {
	t.Helper()
	st, ok := b.(backend.Setter)
	if !ok {
		t.Skipf("%T does not implement backend.Setter (optional)", b)
	}
	return st
}

// getTTL returns key's value (nil if absent) and its PTTL.
func getTTL(t *testing.T, ctx context.Context, b backend.Backend, key string) (any, int64) {
	t.Helper()
	reply, err := b.Eval(ctx, getTTLScript, []string{key})
	must(t, err, "read %s", key)
	a, err := backend.Array(reply, 2)
	must(t, err, "read %s", key)
	ttl, err := backend.Int(a[1])
	must(t, err, "PTTL of %s", key)
	return a[0], ttl
}

func (s *suite) testSetNX(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	st := setter(t, b)
	key := prefix() + ":set"
	ok, err := st.SetNX(ctx, key, "first", 90*time.Second)
	if !ok || err != nil {
		t.Fatalf("SetNX of an absent key: %v, %v; want true", ok, err)
	}
	v, ttl := getTTL(t, ctx, b, key)
	if v != "first" || ttl <= 80_000 || ttl > 90_000 {
		t.Fatalf("after SetNX(%q, 90s): value %#v, PTTL %dms; want \"first\", 80000 < PTTL <= 90000", key, v, ttl)
	}
	ok, err = st.SetNX(ctx, key, "second", time.Hour)
	if ok || err != nil {
		t.Fatalf("SetNX of a key that exists: %v, %v; want false", ok, err)
	}
	if v, ttl2 := getTTL(t, ctx, b, key); v != "first" || ttl2 > ttl {
		t.Fatalf("a SetNX that reported false changed the key: value %#v, PTTL %dms (was %dms)", v, ttl2, ttl)
	}
	// A ttl under a millisecond is rounded up, never down to none.
	short := prefix() + ":short"
	if ok, err := st.SetNX(ctx, short, "x", 1500*time.Microsecond); !ok || err != nil {
		t.Fatalf("SetNX with a ttl of 1.5ms: %v, %v; want true", ok, err)
	}
	if v, ttl := getTTL(t, ctx, b, short); v != nil && (ttl < 0 || ttl > 2) {
		t.Fatalf("after SetNX with a ttl of 1.5ms: value %#v, PTTL %dms; want an expiry of 2ms at most", v, ttl)
	}
}

func (s *suite) testSetNXInvalidTTL(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	st := setter(t, b)
	key := prefix() + ":set"
	for _, ttl := range []time.Duration{0, -time.Second} {
		ok, err := st.SetNX(ctx, key, "x", ttl)
		if ok || !errors.Is(err, dsync.ErrInvalidLease) {
			t.Errorf("SetNX with a ttl of %v: %v, %v; want an error matching ErrInvalidLease", ttl, ok, err)
		}
	}
	if v, _ := getTTL(t, ctx, b, key); v != nil {
		t.Errorf("SetNX with an invalid ttl set the key to %#v", v)
	}
}

func (s *suite) testSetNXOneWinner(t *testing.T, ctx context.Context) {
	const rounds, callers = 20, 20
	backends := []backend.Backend{s.newBackend(t), s.newBackend(t)}
	setter(t, backends[0])
	p := prefix()
	for round := range rounds {
		key := fmt.Sprintf("%s:%d", p, round)
		var wins atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for g := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := backends[g%2].(backend.Setter).SetNX(ctx, key, fmt.Sprint(g), time.Minute)
				if err != nil {
					errs <- err
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: SetNX: %v", round, err)
		}
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d of %d SetNX of one key reported true, want 1", round, n, callers)
		}
	}
}

func (s *suite) testSetNXContext(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	st := setter(t, b)
	key := "{" + prefix() + "}:set" // one slot for every key of the test
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if ok, err := st.SetNX(cctx, key, "x", time.Minute); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("SetNX with a cancelled context: %v, %v; want context.Canceled", ok, err)
	}
	if v, _ := getTTL(t, ctx, b, key); v != nil {
		t.Fatalf("SetNX with an ended context set the key to %#v", v)
	}
	// Contexts that end while the server runs a 600ms script, on the
	// key's node: each SetNX returns by its end. A SetNX that is back
	// before its context ended met no stall yet, and is tried again.
	for _, kind := range []string{"a deadline", "a deadline without Done", "a cancellation"} {
		for attempt := 0; ; attempt++ {
			stalled := make(chan error, 1)
			go func() {
				_, err := b.Eval(ctx, stallScript, []string{key}, 600)
				stalled <- err
			}()
			time.Sleep(20 * time.Millisecond) // time is what is tested: let the stall reach the server first
			start := time.Now()
			var cctx context.Context
			cancel := func() {}
			switch kind {
			case "a deadline":
				cctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
			case "a deadline without Done":
				cctx = backend.DeadlineContext(ctx, start.Add(50*time.Millisecond))
			default:
				cctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			_, err := st.SetNX(cctx, fmt.Sprintf("%s:%s:%d", key, kind, attempt), "x", time.Minute)
			took := time.Since(start)
			cancel()
			if err := <-stalled; err != nil && !wait.Transient(err) {
				t.Fatalf("the stalling script: %v", err)
			}
			early := err == nil && took < 50*time.Millisecond
			switch {
			case early && attempt < 5:
				continue
			case early:
				t.Logf("SetNX with %s: the server was never busy when it was sent: not checked", kind)
			case err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
				t.Errorf("SetNX with %s of 50ms on a server busy for 600ms: %v after %v, want the context's error", kind, err, took)
			case took > s.bound(300*time.Millisecond):
				t.Errorf("SetNX with %s of 50ms on a server busy for 600ms returned after %v (%v): it waited for the server", kind, took, err)
			}
			break
		}
	}
	// The backend still works, and the abandoned calls did what they did.
	if ok, err := st.SetNX(ctx, key, "after", time.Minute); !ok || err != nil {
		t.Fatalf("SetNX after abandoned calls: %v, %v; want true", ok, err)
	}
}

func (s *suite) testSetNXClosed(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	st := setter(t, b)
	must(t, b.Close(), "close")
	if ok, err := st.SetNX(ctx, prefix()+":set", "x", time.Minute); ok || !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("SetNX after Close: %v, %v; want ErrClosed", ok, err)
	}
}
