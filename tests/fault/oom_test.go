package fault

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// A release that a server out of memory refuses (maxmemory reached under
// noeviction: the script's first write fails with OOM) is retried as an
// error that may pass, not taken for a key that dsync did not write: once
// memory is back the release, gone on in the background, completes, and a
// fresh owner takes the lock long before the hold's lease would have run
// out. Each primitive is held by a lone holder, whose release is a single
// write that also reads the state it replaces.
func TestReleaseRefusedForMemoryIsRetried(t *testing.T) {
	srv := startServer(t)
	type lock struct {
		take, release func(ctx context.Context) error
		free          func(ctx context.Context) (bool, error) // a fresh owner's try, given back
	}
	exclusive := func(open func() dsync.Locker) lock {
		l := open()
		return lock{take: l.LockContext, release: l.UnlockContext, free: freeExclusive(open())}
	}
	cases := []struct {
		kind string
		open func(name string) lock
	}{
		{"mutex", func(name string) lock {
			return exclusive(func() dsync.Locker { return mutex.New(newBackend(t, srv.Addr()), name, mutex.WithLogger(nil)) })
		}},
		{"fairlock", func(name string) lock {
			return exclusive(func() dsync.Locker { return fairlock.New(newBackend(t, srv.Addr()), name, fairlock.WithLogger(nil)) })
		}},
		{"rwlock-write", func(name string) lock {
			return exclusive(func() dsync.Locker { return rwlock.New(newBackend(t, srv.Addr()), name, rwlock.WithLogger(nil)) })
		}},
		{"rwlock-read", func(name string) lock {
			m := rwlock.New(newBackend(t, srv.Addr()), name, rwlock.WithLogger(nil))
			return lock{take: m.RLockContext, release: m.RUnlockContext,
				free: freeExclusive(rwlock.New(newBackend(t, srv.Addr()), name, rwlock.WithLogger(nil)))}
		}},
		{"semaphore", func(name string) lock {
			s := semaphore.New(newBackend(t, srv.Addr()), name, 2, semaphore.WithLogger(nil))
			fresh := semaphore.New(newBackend(t, srv.Addr()), name, 2, semaphore.WithLogger(nil))
			return lock{
				take:    func(ctx context.Context) error { return s.Acquire(ctx, 1) },
				release: func(ctx context.Context) error { return s.Release(ctx, 1) },
				free: func(ctx context.Context) (bool, error) {
					o := dsync.WithOwner(ctx)
					ok, err := fresh.TryAcquire(o, 2)
					if ok {
						err = fresh.Release(o, 2)
					}
					return ok, err
				},
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l := c.open("oom-" + dsync.NewID()[:8])
			o := dsync.WithOwner(ctx)
			if err := l.take(o); err != nil {
				t.Fatal(err)
			}
			if _, err := do(ctx, srv.Addr(), "CONFIG", "SET", "maxmemory-policy", "noeviction"); err != nil {
				t.Fatal(err)
			}
			if _, err := do(ctx, srv.Addr(), "CONFIG", "SET", "maxmemory", "1"); err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(o, 300*time.Millisecond)
			err := l.release(rctx)
			rcancel()
			if _, err := do(ctx, srv.Addr(), "CONFIG", "SET", "maxmemory", "0"); err != nil {
				t.Fatal(err)
			}
			if errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("release while the server refuses writes: %v; want the ctx's error, the release going on", err)
			}
			start := time.Now()
			for {
				ok, err := l.free(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					break
				}
				if time.Since(start) > 3*time.Second {
					t.Fatalf("a fresh owner cannot take the %s 3s after memory came back: the refused release was not retried", c.kind)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("release while out of memory: %v; free again %v after memory came back", err, time.Since(start).Round(time.Millisecond))
		})
	}
}
