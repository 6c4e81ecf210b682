package mutex_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// state reads the lock key as the scripts store it (lua/state.lua): the
// token, and the owner and waiting flag while held ("" and false when
// free). ok is false when the key is missing.
func state(t *testing.T, srv *miniredis.Miniredis, key string) (token int64, owner string, waiting, ok bool) {
	t.Helper()
	v, err := srv.Get(key)
	if err != nil {
		return 0, "", false, false
	}
	f := strings.SplitN(v, " ", 5)
	token, err = strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		t.Fatalf("lock key %s = %q: no token", key, v)
	}
	switch len(f) {
	case 1:
		return token, "", false, true
	case 5:
		return token, f[3], f[2] == "1", true
	}
	t.Fatalf("lock key %s = %q: neither held nor free", key, v)
	return
}

// markWaiting sets the waiting flag of the hold at key, as the
// registration of a waiter does.
func markWaiting(t *testing.T, srv *miniredis.Miniredis, key string) {
	t.Helper()
	v, err := srv.Get(key)
	f := strings.SplitN(v, " ", 5)
	if err != nil || len(f) != 5 {
		t.Fatalf("lock key %s = %q, %v: not held", key, v, err)
	}
	f[2] = "1"
	ttl := srv.TTL(key)
	srv.Set(key, strings.Join(f, " "))
	srv.SetTTL(key, ttl)
}

// assertOnlyToken fails t unless the only key left is name's lock key,
// holding nothing but the last token, to expire after FenceTTL.
func assertOnlyToken(t *testing.T, srv *miniredis.Miniredis, name string) {
	t.Helper()
	key := "dsync:mutex:{" + name + "}"
	if keys := srv.Keys(); len(keys) != 1 || keys[0] != key {
		t.Errorf("keys left: %v, want only %s", keys, key)
		return
	}
	if _, owner, _, _ := state(t, srv, key); owner != "" {
		t.Errorf("lock key held by %q, want only the last token", owner)
	}
	if ttl := srv.TTL(key); ttl <= 0 || ttl > mutex.FenceTTL {
		t.Errorf("lock key TTL %v, want within FenceTTL", ttl)
	}
}

func TestFakeTimeFreedMutexKeepsOnlyItsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.Fake(t)
		ctx := context.Background()
		m := mutex.New(testserver.FakeBackend(t, srv), "tok")
		var last int64
		for i := range 3 {
			m.Lock()
			tok, err := m.Token(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && tok != last+1 {
				t.Errorf("token %d after %d, want one more", tok, last)
			}
			last = tok
			if _, owner, waiting, _ := state(t, srv, "dsync:mutex:{tok}"); owner == "" || waiting {
				t.Errorf("held state: owner %q, waiting %v; want an owner, no waiters", owner, waiting)
			}
			m.Unlock()
			assertOnlyToken(t, srv, "tok")
			if tok, _, _, _ := state(t, srv, "dsync:mutex:{tok}"); tok != last {
				t.Errorf("freed key keeps token %d, want the last, %d", tok, last)
			}
		}
		// The key, lost, seeds the next token from the server clock.
		time.Sleep(mutex.FenceTTL + time.Second)
		if keys := srv.Keys(); len(keys) != 0 {
			t.Fatalf("keys after FenceTTL: %v", keys)
		}
		m.Lock()
		defer m.Unlock()
		if tok, err := m.Token(ctx); err != nil || tok <= last {
			t.Errorf("token after the key expired = %d, %v; want above %d", tok, err, last)
		}
	})
}

func TestFakeTimeWaiterFlagsTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.Fake(t)
		ctx := context.Background()
		holder := mutex.New(remote{testserver.FakeBackend(t, srv)}, "flag")
		holder.Lock()
		waiter := mutex.New(testserver.FakeBackend(t, srv), "flag")
		got := queue(t, ctx, waiter)
		synctest.Wait()
		if _, _, waiting, _ := state(t, srv, "dsync:mutex:{flag}"); !waiting {
			t.Fatal("a waiter registered, the hold is not flagged")
		}
		holder.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		waiter.Unlock()
		assertOnlyToken(t, srv, "flag")
	})
}
