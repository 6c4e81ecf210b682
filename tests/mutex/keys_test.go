package mutex_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
	"github.com/gomodule/redigo/redis"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// TestForeignValueAtLockKey: defect 7, a value at the lock key that dsync did not write is treated as a free mutex and overwritten (or, of the wrong type, fails with a bare server error).
func TestForeignValueAtLockKey(t *testing.T) {
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
				name := uniqueName("foreign")
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

// TestWaiterSetExpires: expire_at_least (lib.lua) skips a key whose
// PTTL is -1, which is what ZADD leaves on a new sorted set, so the waiter
// set never gets the TTL the package doc promises ("expires 15s after the
// last registration"). When the holder and a registered waiter both die,
// the waiter set stays on the server forever.
func TestWaiterSetExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "leak"
		hb, wb := fake.FakeBackend(t, srv), fake.FakeBackend(t, srv)
		holder := mutex.New(hb, name, mutex.WithLogger(nil))
		holder.Lock()
		waiter := mutex.New(wb, name, mutex.WithLogger(nil))
		got := make(chan error, 1)
		go func() { got <- waiter.LockContext(ctx) }()
		synctest.Wait()
		waiters := "dsync:mutex:{" + name + "}:waiters"
		t.Logf("after a registration: TTL(waiters) = %v", srv.TTL(waiters))
		wb.Close() // both processes die
		<-got
		hb.Close()
		time.Sleep(2 * time.Hour) // the lease, the waiter TTL, the fence TTL
		for _, k := range srv.Keys() {
			t.Errorf("key %s left behind 2h after every process died (TTL %v)", k, srv.TTL(k))
		}
	})
}

// TestForeignNumberAtLockKeyLeftAlone: a foreign string that happens to be a
// number (a counter, say) at the lock key is read as dsync's freed state
// ("<token>") and overwritten by the next acquisition, though dsync's freed
// state always carries an expiry (the fence TTL) and this one has none.
// The package promises a foreign value at the lock key is reported as
// ErrUnexpectedReply and left untouched.
func TestForeignNumberAtLockKeyLeftAlone(t *testing.T) {
	srv := testserver.Real(t)
	bg := context.Background()
	name := "foreignnum-" + dsync.NewID()[:12]
	key := "dsync:mutex:{" + name + "}"
	t.Cleanup(func() { srv.Do(bg, "DEL", key, key+":waiters", key+":fence") })
	if _, err := srv.Do(bg, "SET", key, "42"); err != nil { // no expiry
		t.Fatal(err)
	}
	m := mutex.New(srv.NewBackend(t), name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	ok, err := m.TryLockContext(ctx)
	if ok {
		m.UnlockContext(bg)
	}
	v, _ := srv.Do(bg, "GET", key)
	if ok || !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Errorf("TryLockContext on a lock key holding a foreign \"42\" without expiry = %v, %v; want ErrUnexpectedReply, key untouched (now %q)", ok, err, v)
	}
}

// TestFreedStateOfPreviousVersionAccepted: before 43f6596 a release left the
// freed state "<token>" with the fence TTL (an hour) as its expiry; now
// only "<token> free" is dsync's, and "<token>" is foreign. During a
// rolling upgrade, every lock last released by a process of the previous
// version fails in the new one for up to an hour: LockContext and
// ForceUnlock return ErrUnexpectedReply, and Lock panics. The value the
// previous version wrote is told from a foreign number by its expiry
// (the earlier review's TestForeignNumberAtLockKeyLeftAlone had "no expiry").
func TestFreedStateOfPreviousVersionAccepted(t *testing.T) {
	srv := testserver.Real(t)
	bg := context.Background()
	name := uniqueName("oldfree")
	key := "dsync:mutex:{" + name + "}"
	t.Cleanup(func() { srv.Do(bg, "DEL", key, key+":waiters", key+":fence") })
	// What free() wrote before 43f6596: the token, PX the fence TTL.
	if _, err := srv.Do(bg, "SET", key, "1732390000000001", "PX", 3600000); err != nil {
		t.Fatal(err)
	}
	m := mutex.New(srv.NewBackend(t), name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	if err := m.LockContext(ctx); err != nil {
		t.Errorf("LockContext on a lock freed by the previous version: %v", err)
	} else {
		m.UnlockContext(bg)
	}
	if _, err := m.ForceUnlock(ctx); err != nil {
		t.Errorf("ForceUnlock on a lock freed by the previous version: %v (nothing in dsync can clear it)", err)
	}
	if p := catchPanic(m.Lock); p != nil {
		t.Errorf("Lock panicked: %v", p)
	} else {
		m.Unlock()
	}
}
