package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// stallKind is a primitive as TestGiveUpsDuringStallLeaveNothing drives
// it: a hold to keep, a waiter's acquisition, and what is left on the
// server once the hold is released.
type stallKind struct {
	name string
	// hold takes the primitive through b for ctx's owner, and returns
	// its release.
	hold func(ctx context.Context, t *testing.T, b backend.Backend, name string) func() error
	// acquire waits for the primitive through b (the i-th waiter).
	acquire func(ctx context.Context, b backend.Backend, name string, i int) error
	// left describes what is left on the server: "" if nothing is held
	// or queued.
	left func(ctx context.Context, b backend.Backend, name string) (string, error)
}

func stallKinds() []stallKind {
	return []stallKind{
		{"mutex",
			func(ctx context.Context, t *testing.T, b backend.Backend, name string) func() error {
				m := mutex.New(b, name, mutex.WithLogger(nil))
				if err := m.LockContext(ctx); err != nil {
					t.Fatal(err)
				}
				return func() error { return m.UnlockContext(ctx) }
			},
			func(ctx context.Context, b backend.Backend, name string, i int) error {
				return mutex.New(b, name, mutex.WithLogger(nil)).LockContext(ctx)
			},
			func(ctx context.Context, b backend.Backend, name string) (string, error) {
				s, err := mutex.New(b, name, mutex.WithLogger(nil)).State(ctx)
				if err != nil || !s.Locked && s.Waiters == 0 {
					return "", err
				}
				return fmt.Sprintf("%+v", s), nil
			}},
		{"fairlock",
			func(ctx context.Context, t *testing.T, b backend.Backend, name string) func() error {
				m := fairlock.New(b, name, fairlock.WithLogger(nil))
				if err := m.LockContext(ctx); err != nil {
					t.Fatal(err)
				}
				return func() error { return m.UnlockContext(ctx) }
			},
			func(ctx context.Context, b backend.Backend, name string, i int) error {
				return fairlock.New(b, name, fairlock.WithLogger(nil)).LockContext(ctx)
			},
			func(ctx context.Context, b backend.Backend, name string) (string, error) {
				s, err := fairlock.New(b, name, fairlock.WithLogger(nil)).State(ctx)
				if err != nil || !s.Locked && s.Queued == 0 {
					return "", err
				}
				return fmt.Sprintf("%+v", s), nil
			}},
		{"semaphore",
			func(ctx context.Context, t *testing.T, b backend.Backend, name string) func() error {
				s := semaphore.New(b, name, 1, semaphore.WithLogger(nil))
				if err := s.Acquire(ctx, 1); err != nil {
					t.Fatal(err)
				}
				return func() error { return s.Release(ctx, 1) }
			},
			func(ctx context.Context, b backend.Backend, name string, i int) error {
				return semaphore.New(b, name, 1, semaphore.WithLogger(nil)).Acquire(ctx, 1)
			},
			func(ctx context.Context, b backend.Backend, name string) (string, error) {
				s, err := semaphore.New(b, name, 1, semaphore.WithLogger(nil)).State(ctx)
				if err != nil || s.Held == 0 && s.Queued == 0 {
					return "", err
				}
				return fmt.Sprintf("%+v", s), nil
			}},
		{"rwlock",
			func(ctx context.Context, t *testing.T, b backend.Backend, name string) func() error {
				m := rwlock.New(b, name, rwlock.WithLogger(nil))
				if err := m.LockContext(ctx); err != nil {
					t.Fatal(err)
				}
				return func() error { return m.UnlockContext(ctx) }
			},
			func(ctx context.Context, b backend.Backend, name string, i int) error {
				m := rwlock.New(b, name, rwlock.WithLogger(nil))
				if i%2 == 0 {
					return m.RLockContext(ctx)
				}
				return m.LockContext(ctx)
			},
			func(ctx context.Context, b backend.Backend, name string) (string, error) {
				s, err := rwlock.New(b, name, rwlock.WithLogger(nil)).State(ctx)
				if err != nil || s.Writer == "" && s.Readers == 0 && s.WaitingWriters == 0 && s.WaitingReaders == 0 {
					return "", err
				}
				return fmt.Sprintf("%+v", s), nil
			}},
	}
}

// Guard (passes on d224b08): waiters that give up while the server is
// stalled, through two backend values that each keep two round trips in
// flight (pools that keep connections idle), leave nothing on the server.
// Their attempts are on the wire, on the caller's goroutine or in batches,
// when their contexts end (deadlines, and cancellations without one), and
// the clean-ups that withdraw them follow once the round trips are given
// up; the server runs both when it answers again. Once the hold is
// released, the primitive is free with nobody queued: no clean-up ran
// before the attempt it withdraws.
func TestGiveUpsDuringStallLeaveNothing(t *testing.T) {
	srv := startServer(t)
	holderB := newBackend(t, srv.Addr())
	waiterBs := []backend.Backend{newBackend(t, srv.Addr()), newBackend(t, srv.Addr())}
	for _, k := range stallKinds() {
		t.Run(k.name, func(t *testing.T) {
			name := "stalled-give-ups:" + k.name
			hctx := dsync.WithOwner(context.Background())
			release := k.hold(hctx, t, holderB, name)
			end := pauseServer(t, srv, "DEBUG SLEEP", 1500*time.Millisecond)
			const waiters = 16
			var wg sync.WaitGroup
			errs := make([]error, waiters)
			for i := range waiters {
				wg.Go(func() {
					ctx := dsync.WithOwner(context.Background())
					var cancel context.CancelFunc
					if i%3 == 0 {
						// Cancelled, without a deadline.
						ctx, cancel = context.WithCancel(ctx)
						timer := time.AfterFunc(time.Duration(rand.IntN(400))*time.Millisecond, cancel)
						defer timer.Stop()
					} else {
						ctx, cancel = context.WithTimeout(ctx, time.Duration(20+rand.IntN(500))*time.Millisecond)
					}
					defer cancel()
					errs[i] = k.acquire(ctx, waiterBs[i%2], name, i)
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err == nil {
					t.Errorf("waiter %d acquired on a stalled server, the hold kept", i)
				}
			}
			end()
			wait.Settle()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if left, err := k.left(hctx, holderB, name); err != nil || left == "" {
				t.Errorf("before the release, nothing seen held: %q, %v", left, err)
			}
			if err := release(); err != nil {
				t.Fatalf("release: %v", err)
			}
			if left, err := k.left(ctx, holderB, name); err != nil || left != "" {
				t.Errorf("after the waiters gave up and the hold was released: %s, %v; want the primitive free with nobody queued", left, err)
			}
		})
	}
}
