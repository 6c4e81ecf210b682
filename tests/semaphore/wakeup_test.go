package semaphore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Wake-ups late, lost, or cut off with their connection: the waiter never
// believes a hand-off it heard too late, and one it never heard costs it at
// most a heartbeat.

// muffled delays (or, with a negative delay, drops) every pub/sub message
// its subscriptions receive, gaps aside.
type muffled struct {
	backend.Backend
	delay time.Duration
}

func (m muffled) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	sub, err := m.Backend.Subscribe(ctx, channel)
	if err != nil {
		return nil, err
	}
	return &muffledSub{sub, m.delay}, nil
}

type muffledSub struct {
	backend.Subscription
	delay time.Duration
}

func (s *muffledSub) Receive(ctx context.Context) (backend.Message, error) {
	for {
		m, err := s.Subscription.Receive(ctx)
		if err != nil || m.Gap {
			return m, err
		}
		if s.delay < 0 {
			continue
		}
		time.Sleep(s.delay)
		return m, nil
	}
}

// A wake-up that arrives after the permits it carried expired (the waiter
// took longer than the hand-off lease to hear it) is refused: the waiter
// does not believe it holds permits that another waiter took since.
func TestLateWakeUpRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		open := func(b backend.Backend, opts ...semaphore.Option) *semaphore.Semaphore {
			return semaphore.New(b, "late", 1, append(opts, semaphore.WithLogger(nil))...)
		}
		holder := open(elsewhere{fake.FakeBackend(t, srv)})
		if err := holder.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// W hears its wake-ups 3s late, past the 2s hand-off lease, and
		// beats only every 10s.
		w := open(muffled{fake.FakeBackend(t, srv), 3 * time.Second}, semaphore.WithWaiterTimeout(30*time.Second))
		wGot := acquire(ctx, w, 1)
		queued(t, wGot)
		x := open(fake.FakeBackend(t, srv))
		xGot := acquire(ctx, x, 1)
		queued(t, xGot)
		if err := holder.Release(ctx, 1); err != nil { // handed to W, for 2s
			t.Fatal(err)
		}
		select {
		case err := <-xGot: // when W's hand-off lease ran out
			if err != nil {
				t.Fatal(err)
			}
		case err := <-wGot:
			t.Fatalf("W acquired before X with its wake-up 3s late: %v", err)
		}
		xHeld := time.Now()
		time.Sleep(5 * time.Second) // W's late wake-up arrives meanwhile
		select {
		case err := <-wGot:
			t.Fatalf("W acquired (%v) %v into X's hold of the only permit: its late wake-up was taken as current", err, time.Since(xHeld))
		default:
		}
		if err := x.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := <-wGot; err != nil {
			t.Fatal(err)
		}
		if err := w.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		if k := fakeKeysLeft(srv); len(k) != 0 {
			t.Errorf("keys left: %v", k)
		}
	})
}

// A wake-up that never arrives costs the waiter at most a heartbeat: its
// next attempt finds the permits handed to it.
func TestLostWakeUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const timeout = 3 * time.Second // a heartbeat every second
		holder := semaphore.New(elsewhere{fake.FakeBackend(t, srv)}, "lost", 2)
		if err := holder.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		w := semaphore.New(muffled{fake.FakeBackend(t, srv), -1}, "lost", 2, semaphore.WithWaiterTimeout(timeout))
		got := acquire(ctx, w, 2)
		queued(t, got)
		released := time.Now()
		if err := holder.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > timeout/3 {
			t.Errorf("a waiter whose wake-up was lost acquired %v after the release; want within a heartbeat, %v", d, timeout/3)
		}
		st, err := w.State(ctx)
		if err != nil || st.Permits != 2 || st.Held != 2 {
			t.Errorf("state = %+v, %v; want the waiter's 2 permits", st, err)
		}
		if err := w.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
	})
}
