package mutex_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// state reads the lock key as the scripts store it (see
// internal/script/codec.lua): the token (0 while not drawn), and the owner
// and waiting flag while held ("" and false when free). ok is false when
// the key is missing.
func state(t *testing.T, srv *miniredis.Miniredis, key string) (token int64, owner string, waiting, ok bool) {
	t.Helper()
	v, err := srv.Get(key)
	if err != nil {
		return 0, "", false, false
	}
	f := strings.SplitN(v, " ", 5)
	if len(f) == 2 && f[1] != "free" {
		return 0, f[0], false, true // the plain form: a hold taken by one SET NX
	}
	token, err = strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		t.Fatalf("lock key %s = %q: no token", key, v)
	}
	switch {
	case len(f) == 2 && f[1] == "free":
		return token, "", false, true
	case len(f) == 5:
		return token, f[3], f[2] == "1", true
	}
	t.Fatalf("lock key %s = %q: neither held nor free", key, v)
	return
}

// markWaiting sets the waiting flag of the hold at key, as the
// registration of a waiter does; a plain hold must have drawn its token
// first (Token).
func markWaiting(t *testing.T, srv *miniredis.Miniredis, key string) {
	t.Helper()
	v, err := srv.Get(key)
	f := strings.SplitN(v, " ", 5)
	if err != nil || len(f) != 5 {
		t.Fatalf("lock key %s = %q, %v: not held in the full form", key, v, err)
	}
	f[2] = "1"
	ttl := srv.TTL(key)
	srv.Set(key, strings.Join(f, " "))
	srv.SetTTL(key, ttl)
}

// fenceTTL is the default fence ttl: how long the fence key keeps the last
// token drawn.
const fenceTTL = time.Hour

// assertOnlyToken fails t unless the only key of name left is its fence
// key, keeping the last token drawn, to expire within the fence ttl: a
// freed mutex keeps nothing else. With no token drawn, no key is left.
func assertOnlyToken(t *testing.T, srv *miniredis.Miniredis, name string) {
	t.Helper()
	key := "dsync:mutex:{" + name + "}:fence"
	keys := srv.Keys()
	if len(keys) == 0 {
		return
	}
	if len(keys) != 1 || keys[0] != key {
		t.Errorf("keys left: %v, want only %s", keys, key)
		return
	}
	if v, err := srv.Get(key); err != nil || v == "" {
		t.Errorf("fence key %s = %q, %v; want the last token", key, v, err)
	}
	if ttl := srv.TTL(key); ttl <= 0 || ttl > fenceTTL {
		t.Errorf("%s TTL %v, want within the fence ttl, %v", key, ttl, fenceTTL)
	}
}

func TestFakeTimeFreedMutexKeepsOnlyItsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		m := mutex.New(fake.FakeBackend(t, srv), "tok")
		var last int64
		for i := range 3 {
			m.Lock()
			// An uncontended hold is plain: its token is drawn when asked.
			if tok, owner, _, _ := state(t, srv, "dsync:mutex:{tok}"); owner == "" || tok != 0 {
				t.Errorf("hold %d: owner %q, token %d; want a plain hold", i, owner, tok)
			}
			tok, err := m.Token(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && tok != last+1 {
				t.Errorf("token %d after %d, want one more", tok, last)
			}
			last = tok
			if drawn, owner, waiting, _ := state(t, srv, "dsync:mutex:{tok}"); owner == "" || waiting || drawn != tok {
				t.Errorf("hold %d after Token: owner %q, waiting %v, token %d; want held, nobody waiting, token %d", i, owner, waiting, drawn, tok)
			}
			m.Unlock()
			assertOnlyToken(t, srv, "tok")
			if v, _ := srv.Get("dsync:mutex:{tok}:fence"); v != strconv.FormatInt(last, 10) {
				t.Errorf("fence key keeps %q, want the last token, %d", v, last)
			}
		}
		// The fence key, gone with its ttl, leaves the next token to the
		// server clock.
		time.Sleep(fenceTTL + time.Second)
		if keys := srv.Keys(); len(keys) != 0 {
			t.Fatalf("keys after the fence ttl: %v", keys)
		}
		m.Lock()
		defer m.Unlock()
		if tok, err := m.Token(ctx); err != nil || tok <= last {
			t.Errorf("token after the fence key expired = %d, %v; want above %d", tok, err, last)
		}
	})
}

// registeredWaiter has holder lock name and a waiter of another backend
// register behind it on the server and go to sleep; it returns the waiter
// and its LockContext's result.
func registeredWaiter(t *testing.T, srv *miniredis.Miniredis, holder *mutex.Mutex, name string) (*mutex.Mutex, <-chan error) {
	t.Helper()
	holder.Lock()
	waiter := mutex.New(fake.FakeBackend(t, srv), name)
	got := queue(t, context.Background(), waiter)
	synctest.Wait()
	return waiter, got
}

func TestFakeTimeWaiterFlagsTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		holder := mutex.New(fake.FakeBackend(t, srv), "flag")
		waiter, got := registeredWaiter(t, srv, holder, "flag")
		if _, _, waiting, _ := state(t, srv, "dsync:mutex:{flag}"); !waiting {
			t.Fatal("a waiter registered, the hold is not flagged")
		}
		start := time.Now()
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("waiter acquired %v after the unlock; want at once", d)
		}
		waiter.Unlock()
		assertOnlyToken(t, srv, "flag")
	})
}

func TestFakeTimeTokenAfterExpiredHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		m := mutex.New(fake.FakeBackend(t, srv), "exp", mutex.WithLease(time.Second))
		m.Lock()
		last, err := m.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		<-m.Done(ctx)                     // the lease ran out, less the expiry margin
		time.Sleep(12 * time.Millisecond) // the margin: the lock key is gone
		if _, _, _, ok := state(t, srv, "dsync:mutex:{exp}"); ok {
			t.Fatal("lock key still there after the lease")
		}
		// The next token is seeded from the server clock, which has moved
		// on since the last was handed out.
		other := mutex.New(fake.FakeBackend(t, srv), "exp")
		other.Lock()
		defer other.Unlock()
		if tok, err := other.Token(ctx); err != nil || tok <= last {
			t.Errorf("token after an expired hold = %d, %v; want above %d", tok, err, last)
		}
	})
}

func TestFakeTimeWaiterOfLostKeyIsHandedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		holder := mutex.New(fake.FakeBackend(t, srv), "lost")
		waiter, got := registeredWaiter(t, srv, holder, "lost") // asleep until its heartbeat
		// The lock key is lost (a flush, a failover), and with it the
		// flag that says a waiter registered. A plain acquisition does not
		// look at the queue, nor its release: the waiter finds the mutex
		// free at its heartbeat.
		srv.Del("dsync:mutex:{lost}")
		other := mutex.New(fake.FakeBackend(t, srv), "lost")
		other.Lock()
		start := time.Now()
		other.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("waiter acquired %v after the unlock; want within its 5s heartbeat", d)
		}
		waiter.Unlock()
		holder.Unlock() // lost: logged
	})
}
