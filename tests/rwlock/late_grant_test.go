package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// slowSub delays every pub/sub message its backend's subscriptions
// receive: a subscriber connection that lags behind the command
// connections (a busy client, a congested link).
type slowSub struct {
	backend.Backend
	delay time.Duration
}

func (s slowSub) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	sub, err := s.Backend.Subscribe(ctx, channel)
	if err != nil {
		return nil, err
	}
	return slowSubscription{sub, s.delay}, nil
}

type slowSubscription struct {
	backend.Subscription
	delay time.Duration
}

func (s slowSubscription) Receive(ctx context.Context) (backend.Message, error) {
	m, err := s.Subscription.Receive(ctx)
	if err == nil && !m.Gap {
		time.Sleep(s.delay)
	}
	return m, err
}

// TestLateGrantAfterForceUnlockRefused: a waiter of this process is
// handed the lock by a release in another process, whose wake-up (carrying
// the grant) lags 300ms on the waiter's subscription. Meanwhile this process
// calls ForceUnlock: it takes the hold just handed to the waiter (nobody
// here keeps a lease for it yet, so lease.LoseHold ends nothing) and passes
// the lock to a writer of this process, which gets in at once. Then the
// late grant arrives: its token is above every token the waiter's failed
// attempts saw, and its last attempt was less than Handed/2 ago, so
// wait.Acquire accepts it without a round trip (internal/wait/wait.go, the
// w.C() case; internal/core/acquire.go Granted) and the acquisition returns
// success for a hold that no longer exists:
//
//   - "reader": RLockContext returns nil while another owner holds the
//     write lock, and RDone stays open;
//   - "writer": LockContext returns nil while another owner holds the
//     write lock: two writers, Done open.
//
// ForceUnlock's contract: "A holder in this process learns of the loss at
// once through Done or RDone"; the brief's: a grant that arrives after the
// hold it names is gone must be refused, the waiter trying again. Here the
// waiter only learns at its first renewal, after having been told it
// holds.
func TestLateGrantAfterForceUnlockRefused(t *testing.T) {
	for _, role := range []string{"reader", "writer"} {
		t.Run(role, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				// The releaser is in another process: its hand-offs are
				// published.
				x := rwlock.New(elsewhere{fake.FakeBackend(t, srv)}, "late", rwlock.WithLogger(nil))
				w := rwlock.New(slowSub{fake.FakeBackend(t, srv), 300 * time.Millisecond}, "late", rwlock.WithLogger(nil))
				y := rwlock.New(fake.FakeBackend(t, srv), "late", rwlock.WithLogger(nil))
				admin := rwlock.New(fake.FakeBackend(t, srv), "late", rwlock.WithLogger(nil))
				x.Lock()
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				ow, oy := dsync.WithOwner(wctx), dsync.WithOwner(wctx)
				wgot, ygot := make(chan error, 1), make(chan error, 1)
				go func() {
					if role == "reader" {
						wgot <- w.RLockContext(ow)
					} else {
						wgot <- w.LockContext(ow)
					}
				}()
				synctest.Wait()
				go func() { ygot <- y.LockContext(oy) }()
				synctest.Wait()
				st := state(t, ctx, admin)
				if st.WaitingWriters+st.WaitingReaders < 2 {
					t.Fatalf("want both waiting: %+v", st)
				}
				x.Unlock() // hands the lock to w; its wake-up lags
				if took, err := admin.ForceUnlock(ctx); !took || err != nil {
					t.Fatalf("ForceUnlock = %v, %v; want it to take w's hold", took, err)
				}
				if err := <-ygot; err != nil {
					t.Fatalf("y: %v", err)
				}
				err := <-wgot
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("w: %v", err)
					}
					return // refused the late grant and waited: fine
				}
				st = state(t, ctx, admin)
				done := w.Done(ow)
				if role == "reader" {
					done = w.RDone(ow)
				}
				select {
				case <-done:
				default:
					t.Errorf("%s w's acquisition returned success from a grant that arrived after ForceUnlock took the hold it named; the lock is now held by %s for writing (state %+v) and w's Done/RDone is open: two holders, one a writer", role, map[bool]string{true: "y", false: "someone else"}[st.Writer != ""], st)
				}
				if role == "reader" {
					w.RUnlockContext(ow)
				} else {
					w.UnlockContext(ow)
				}
				y.UnlockContext(oy)
				time.Sleep(time.Minute)
			})
		})
	}
}
