package script_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// scriptCalls records how many keys and arguments each script call has.
type scriptCalls struct {
	backend.Backend
	mu    sync.Mutex
	calls [][2]int
}

func (c *scriptCalls) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.mu.Lock()
	c.calls = append(c.calls, [2]int{len(keys), len(args)})
	c.mu.Unlock()
	return c.Backend.Eval(ctx, s, keys, args...)
}

func (c *scriptCalls) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return c.Backend.(backend.Setter).SetNX(ctx, key, value, ttl)
}

func (c *scriptCalls) SetNXPublish(ctx context.Context, key, value string, ttl time.Duration, channel, message string) (bool, error) {
	return c.Backend.(backend.SetPublisher).SetNXPublish(ctx, key, value, ttl, channel, message)
}

// during returns the script calls that f makes.
func (c *scriptCalls) during(t *testing.T, f func() error) [][2]int {
	t.Helper()
	c.mu.Lock()
	n := len(c.calls)
	c.mu.Unlock()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][2]int(nil), c.calls[n:]...)
}

// An uncontended hold of every primitive whose release starts with the
// plain release (core.ReleaseSpec.Plain) is released by that alone: one
// script call with the main key and the plain value, which frees the
// primitive. A primitive whose plain value the release gets wrong would
// call its release script after it.
func TestUncontendedReleaseIsPlain(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type pair struct {
		key          string
		lock, unlock func(ctx context.Context) error
	}
	cases := map[string]func(b backend.Backend, name string) pair{
		"mutex": func(b backend.Backend, name string) pair {
			m := mutex.New(b, name, mutex.WithLogger(nil))
			return pair{"dsync:mutex:{" + name + "}", m.LockContext, m.UnlockContext}
		},
		"fairlock": func(b backend.Backend, name string) pair {
			m := fairlock.New(b, name, fairlock.WithLogger(nil))
			return pair{"dsync:fairlock:{" + name + "}", m.LockContext, m.UnlockContext}
		},
		"rwlock write": func(b backend.Backend, name string) pair {
			m := rwlock.New(b, name, rwlock.WithLogger(nil))
			return pair{"dsync:rwlock:{" + name + "}", m.LockContext, m.UnlockContext}
		},
		"rwlock read": func(b backend.Backend, name string) pair {
			m := rwlock.New(b, name, rwlock.WithLogger(nil))
			return pair{"dsync:rwlock:{" + name + "}", m.RLockContext, m.RUnlockContext}
		},
		"semaphore": func(b backend.Backend, name string) pair {
			s := semaphore.New(b, name, 3, semaphore.WithLogger(nil))
			return pair{"dsync:semaphore:{" + name + "}",
				func(ctx context.Context) error { return s.Acquire(ctx, 2) },
				func(ctx context.Context) error { return s.Release(ctx, 2) }}
		},
		"election": func(b backend.Backend, name string) pair {
			e := election.New(b, name, election.WithLogger(nil))
			var term *election.Term
			return pair{"dsync:election:{" + name + "}",
				func(ctx context.Context) (err error) {
					term, err = e.Campaign(ctx, "v")
					return err
				},
				func(ctx context.Context) error { return term.Resign(ctx) }}
		},
	}
	for kind, open := range cases {
		t.Run(kind, func(t *testing.T) {
			c := &scriptCalls{Backend: srv.NewBackend(t)}
			p := open(c, "plainrel-"+dsync.NewID()[:8])
			o := dsync.WithOwner(ctx)
			for i := range 2 { // the first pair loads the scripts
				if err := p.lock(o); err != nil {
					t.Fatal(err)
				}
				calls := c.during(t, func() error { return p.unlock(o) })
				if len(calls) != 1 || calls[0] != [2]int{1, 1} {
					t.Fatalf("release %d of an uncontended hold: script calls (keys, arguments) %v; want one with the main key and the plain value", i+1, calls)
				}
				if n, err := srv.Do(ctx, "EXISTS", p.key); err != nil || n != int64(0) {
					t.Fatalf("EXISTS %s after the release = %v, %v; want 0", p.key, n, err)
				}
			}
		})
	}
}

// A plain hold that waiters queued behind is released by its release
// script, after the plain release missed, and handed to the waiter; the
// handle's next release sends the release script at once, and when that
// finds its hold plain, the one after is the plain release again.
func TestQueuedBehindPlainHoldHandsOff(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "behind-" + dsync.NewID()[:8]
	c := &scriptCalls{Backend: srv.NewBackend(t)}
	m := mutex.New(c, name, mutex.WithLogger(nil))
	other := mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	if err := m.LockContext(o); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	oo := dsync.WithOwner(ctx)
	go func() { got <- other.LockContext(oo) }()
	for i := 0; ; i++ {
		st, err := m.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == 1 {
			break
		}
		if i == 5000 {
			t.Fatalf("the waiter not queued: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	calls := c.during(t, func() error { return m.UnlockContext(o) })
	if len(calls) != 2 || calls[0] != [2]int{1, 1} || calls[1][1] <= 1 {
		t.Fatalf("release of a plain hold with a waiter behind it: script calls (keys, arguments) %v; want the plain release, then the release script", calls)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter not handed the mutex within 5s of the release")
	}
	if err := other.UnlockContext(oo); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"the release script", "the plain release"} {
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		calls := c.during(t, func() error { return m.UnlockContext(o) })
		plain := len(calls) == 1 && calls[0] == [2]int{1, 1}
		script := len(calls) == 1 && calls[0][1] > 1
		if i == 0 && !script || i == 1 && !plain {
			t.Fatalf("release %d after the one that missed: script calls (keys, arguments) %v; want %s alone", i+1, calls, want)
		}
	}
}
