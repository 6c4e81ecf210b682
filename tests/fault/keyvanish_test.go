package fault

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// vanishLease and vanishWaiterTimeout are the leases and waiter timeouts
// of the key-vanishing tests: short, so that a case takes about a second.
const (
	vanishLease         = 600 * time.Millisecond
	vanishWaiterTimeout = 900 * time.Millisecond // a heartbeat every 300ms
)

// busyPrimitive is a primitive made busy by a holder and a waiter, on
// backends of their own, as two processes would be.
type busyPrimitive struct {
	done     <-chan struct{}                         // the holder's Done
	token    int64                                   // the holder's fencing token, 0 if none
	release  func() error                            // the holder's release
	got      <-chan error                            // the waiter's acquisition
	wtoken   func() int64                            // the waiter's token once it acquired, 0 if none
	wrelease func() error                            // the waiter's release
	free     func(ctx context.Context) (bool, error) // a fresh owner's try of all of it, given back at once
}

// vanishKey is a key of a primitive that a test deletes: its suffix after
// the main key, and whether it carries the holder's hold (so that its
// loss is the holder's).
type vanishKey struct {
	suffix string
	hold   bool
	after  string // the suffix of a key that exists once the waiter is registered, if the key itself exists before
}

// exclusiveLock is the exclusive side of mutex, fairlock and rwlock.
type exclusiveLock interface {
	dsync.Locker
	Token(ctx context.Context) (int64, error)
	Done(ctx context.Context) <-chan struct{}
}

// busyExclusive makes holder hold and waiter wait.
func busyExclusive(t *testing.T, ctx context.Context, holder, waiter, fresh exclusiveLock) busyPrimitive {
	t.Helper()
	ho, wo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	if err := holder.LockContext(ho); err != nil {
		t.Fatal(err)
	}
	token, err := holder.Token(ho)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- waiter.LockContext(wo) }()
	return busyPrimitive{
		done:    holder.Done(ho),
		token:   token,
		release: func() error { return holder.UnlockContext(ho) },
		got:     got,
		wtoken: func() int64 {
			tk, _ := waiter.Token(wo)
			return tk
		},
		wrelease: func() error { return waiter.UnlockContext(wo) },
		free:     freeExclusive(fresh),
	}
}

// freeExclusive returns a fresh owner's try of l, given back at once.
func freeExclusive(l dsync.Locker) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		fo := dsync.WithOwner(ctx)
		ok, err := l.TryLockContext(fo)
		if ok {
			err = l.UnlockContext(fo)
		}
		return ok, err
	}
}

// vanishCases are the primitives, each made busy, with every key of its
// state that exists while busy.
func vanishCases() []struct {
	kind  string
	keys  []vanishKey
	start func(t *testing.T, ctx context.Context, b func() backend.Backend, name string) busyPrimitive
} {
	type c = struct {
		kind  string
		keys  []vanishKey
		start func(t *testing.T, ctx context.Context, b func() backend.Backend, name string) busyPrimitive
	}
	mopts := []mutex.Option{mutex.WithWatchdog(vanishLease), mutex.WithLogger(nil)}
	fopts := []fairlock.Option{fairlock.WithWatchdog(vanishLease), fairlock.WithWaiterTimeout(vanishWaiterTimeout), fairlock.WithLogger(nil)}
	ropts := []rwlock.Option{rwlock.WithWatchdog(vanishLease), rwlock.WithWaiterTimeout(vanishWaiterTimeout), rwlock.WithLogger(nil)}
	sopts := []semaphore.Option{semaphore.WithWatchdog(vanishLease), semaphore.WithWaiterTimeout(vanishWaiterTimeout), semaphore.WithLogger(nil)}
	return []c{
		{"mutex", []vanishKey{{"", true, ""}, {":queue", false, ""}, {":expiry", false, ""}},
			func(t *testing.T, ctx context.Context, b func() backend.Backend, name string) busyPrimitive {
				return busyExclusive(t, ctx, mutex.New(b(), name, mopts...), mutex.New(b(), name, mopts...), mutex.New(b(), name, mopts...))
			}},
		{"fairlock", []vanishKey{{"", true, ""}, {":queue", false, ""}, {":expiry", false, ""}},
			func(t *testing.T, ctx context.Context, b func() backend.Backend, name string) busyPrimitive {
				return busyExclusive(t, ctx, fairlock.New(b(), name, fopts...), fairlock.New(b(), name, fopts...), fairlock.New(b(), name, fopts...))
			}},
		// A writer holds, a reader waits.
		{"rwlock-writer", []vanishKey{{"", true, ""}, {":rwait", false, ""}},
			func(t *testing.T, ctx context.Context, b func() backend.Backend, name string) busyPrimitive {
				holder, waiter, fresh := rwlock.New(b(), name, ropts...), rwlock.New(b(), name, ropts...), rwlock.New(b(), name, ropts...)
				ho, wo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
				if err := holder.LockContext(ho); err != nil {
					t.Fatal(err)
				}
				token, err := holder.Token(ho)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				go func() { got <- waiter.RLockContext(wo) }()
				return busyPrimitive{
					done:     holder.Done(ho),
					token:    token,
					release:  func() error { return holder.UnlockContext(ho) },
					got:      got,
					wtoken:   func() int64 { return 0 },
					wrelease: func() error { return waiter.RUnlockContext(wo) },
					free:     freeExclusive(fresh),
				}
			}},
		// A reader holds, a writer waits: the read hold is in the
		// readers' keys, the main key says so, and keeps plain writers
		// out of it: its loss costs the hold (see rw_load in
		// rwlock/lua/rw.lua).
		{"rwlock-reader", []vanishKey{{"", true, ":wqueue"}, {":readers", true, ""}, {":rexpiry", true, ""}, {":wqueue", false, ""}, {":wexpiry", false, ""}},
			func(t *testing.T, ctx context.Context, b func() backend.Backend, name string) busyPrimitive {
				holder, waiter, fresh := rwlock.New(b(), name, ropts...), rwlock.New(b(), name, ropts...), rwlock.New(b(), name, ropts...)
				ho, wo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
				if err := holder.RLockContext(ho); err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				go func() { got <- waiter.LockContext(wo) }()
				return busyPrimitive{
					done:    holder.RDone(ho),
					release: func() error { return holder.RUnlockContext(ho) },
					got:     got,
					wtoken: func() int64 {
						tk, _ := waiter.Token(wo)
						return tk
					},
					wrelease: func() error { return waiter.UnlockContext(wo) },
					free:     freeExclusive(fresh),
				}
			}},
		// Capacity 3: the holder holds 2, the waiter asks for 2.
		// The capacity is set at runtime too (to the handles' 3), so that
		// its key exists.
		{"semaphore", []vanishKey{{"", true, ""}, {":holders", true, ""}, {":queue", false, ""}, {":expiry", false, ""}, {":capacity", false, ""}},
			func(t *testing.T, ctx context.Context, b func() backend.Backend, name string) busyPrimitive {
				holder, waiter, fresh := semaphore.New(b(), name, 3, sopts...), semaphore.New(b(), name, 3, sopts...), semaphore.New(b(), name, 3, sopts...)
				if err := fresh.SetCapacity(ctx, 3); err != nil {
					t.Fatal(err)
				}
				ho, wo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
				if err := holder.Acquire(ho, 2); err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				go func() { got <- waiter.Acquire(wo, 2) }()
				return busyPrimitive{
					done:     holder.Done(ho),
					release:  func() error { return holder.Release(ho, 2) },
					got:      got,
					wtoken:   func() int64 { return 0 },
					wrelease: func() error { return waiter.Release(wo, 2) },
					free: func(ctx context.Context) (bool, error) {
						fo := dsync.WithOwner(ctx)
						ok, err := fresh.TryAcquire(fo, 3)
						if ok {
							err = fresh.Release(fo, 3)
						}
						return ok, err
					},
				}
			}},
		// Capacity 3: the holder holds 2, and instead of a waiter another
		// owner takes and gives back 1 permit at a time for two leases
		// (on a longer lease, which the state's keys take), as a busy
		// semaphore would be: a queued waiter would stop new grants, and
		// without them the state expires by itself.
		{"semaphore-busy", []vanishKey{{"", true, ""}, {":holders", true, ""}},
			func(t *testing.T, ctx context.Context, b func() backend.Backend, name string) busyPrimitive {
				holder, fresh := semaphore.New(b(), name, 3, sopts...), semaphore.New(b(), name, 3, sopts...)
				churner := semaphore.New(b(), name, 3, semaphore.WithWatchdog(5*vanishLease), semaphore.WithLogger(nil))
				ho := dsync.WithOwner(ctx)
				if err := holder.Acquire(ho, 2); err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				go func() {
					co := dsync.WithOwner(ctx)
					stop := time.Now().Add(2 * vanishLease)
					for i := 0; i < 100000 && time.Now().Before(stop); i++ {
						if err := churner.Acquire(co, 1); err != nil {
							got <- err
							return
						}
						// Its own permit may be lost with the key.
						if err := churner.Release(co, 1); err != nil && !errors.Is(err, dsync.ErrNotHeld) {
							got <- err
							return
						}
					}
					got <- nil
				}()
				return busyPrimitive{
					done:     holder.Done(ho),
					release:  func() error { return holder.Release(ho, 2) },
					got:      got,
					wtoken:   func() int64 { return 0 },
					wrelease: func() error { return nil },
					free: func(ctx context.Context) (bool, error) {
						fo := dsync.WithOwner(ctx)
						ok, err := fresh.TryAcquire(fo, 3)
						if ok {
							err = fresh.Release(fo, 3)
						}
						return ok, err
					},
				}
			}},
	}
}

// No key of a primitive holds a count that nothing can return when one of
// its companion keys vanishes (issue 26): each primitive is made busy (a
// holder, and a waiter on another backend), then one key of its state is
// deleted, as an operator or maxmemory eviction (which takes keys one at a
// time) would. Criteria, per key:
//
//   - a key that carried the hold: the holder is told (Done) within a third
//     of the lease plus 200ms, and its release is ErrNotHeld; any other
//     key: the holder's Done stays open past a renewal and it releases;
//   - the waiter acquires within a lease and a heartbeat (plus 500ms) of
//     the release or the loss, with a higher fencing token (for the busy
//     semaphore, whose "waiter" takes and gives back 1 permit at a time
//     for two leases, the loop ends within that bound);
//   - once the waiter gives it back, a fresh owner takes all of it (the
//     lock, every permit) within a lease.
func TestNoCountStuckWhenAKeyVanishes(t *testing.T) {
	srv := startServer(t)
	bound := vanishLease + vanishWaiterTimeout/3 + 500*time.Millisecond
	for _, pc := range vanishCases() {
		for _, k := range pc.keys {
			t.Run(pc.kind+"/key"+k.suffix, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				name := "vanish-" + dsync.NewID()[:8]
				kind := pc.kind
				switch kind {
				case "rwlock-writer", "rwlock-reader":
					kind = "rwlock"
				case "semaphore-busy":
					kind = "semaphore"
				}
				key := fmt.Sprintf("dsync:%s:{%s}%s", kind, name, k.suffix)
				bp := pc.start(t, ctx, func() backend.Backend { return newBackend(t, srv.Addr()) }, name)
				// The key exists once the waiter is registered (or the key
				// named after does).
				for _, key := range []string{key + k.after, key} {
					for i := 0; ; i++ {
						n, err := redis.Int(do(ctx, srv.Addr(), "EXISTS", key))
						if err != nil {
							t.Fatal(err)
						}
						if n == 1 {
							break
						}
						if i == 500 {
							t.Fatalf("%s never appeared", key)
						}
						time.Sleep(2 * time.Millisecond)
					}
				}
				if n, err := redis.Int(do(ctx, srv.Addr(), "DEL", key)); err != nil || n != 1 {
					t.Fatalf("DEL %s = %d, %v", key, n, err)
				}
				deleted := time.Now()
				var told time.Duration
				if k.hold {
					select {
					case <-bp.done:
						told = time.Since(deleted)
					case <-time.After(vanishLease/3 + 200*time.Millisecond):
						t.Fatalf("the holder not told %v after %s vanished", vanishLease/3+200*time.Millisecond, key)
					}
					if err := bp.release(); !errors.Is(err, dsync.ErrNotHeld) {
						t.Errorf("the holder's release after %s vanished = %v, want ErrNotHeld", key, err)
					}
				} else {
					time.Sleep(vanishLease / 2) // a renewal (every third of the lease) must pass
					select {
					case <-bp.done:
						t.Fatalf("the holder was told of a loss when %s, which does not carry its hold, vanished", key)
					default:
					}
					if err := bp.release(); err != nil {
						t.Fatalf("the holder's release after %s vanished: %v", key, err)
					}
				}
				freed := time.Now()
				var waited time.Duration
				select {
				case err := <-bp.got:
					if err != nil {
						t.Fatalf("the waiter: %v", err)
					}
					waited = time.Since(freed)
				case <-time.After(bound):
					t.Fatalf("the waiter still waiting %v after the holder's release or loss (%s vanished)", bound, key)
				}
				if wt := bp.wtoken(); bp.token > 0 && wt <= bp.token && wt != 0 {
					t.Errorf("the waiter's token %d is not above the holder's %d", wt, bp.token)
				}
				if err := bp.wrelease(); err != nil {
					t.Fatalf("the waiter's release: %v", err)
				}
				start := time.Now()
				for i := 0; ; i++ {
					ok, err := bp.free(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						break
					}
					if time.Since(start) > vanishLease || i == 1000 {
						t.Fatalf("a fresh owner cannot take all of the %s %v after it was given back (%s vanished)", pc.kind, vanishLease, key)
					}
					time.Sleep(10 * time.Millisecond)
				}
				holder := "the holder kept its hold"
				if k.hold {
					holder = fmt.Sprintf("the holder was told after %v", told.Round(time.Millisecond))
				}
				t.Logf("%s vanished: %s; the waiter acquired %v after the release or loss; all of it free again after %v",
					key, holder, waited.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			})
		}
	}
}
