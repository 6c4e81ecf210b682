package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/mutex"
)

// NewSharedClient returns two backends that wrap one client the test made.
// It arranges, in a cleanup of t, to close both backends and then the
// client: the suite closes neither backend for good (it closes the first
// mid-test, as a program would, and Close is idempotent), and a backend
// left open at the end fails the suite's leak check.
type NewSharedClient func(t *testing.T) (backend.Backend, backend.Backend)

// WithSharedClient gives the suite backends that share the caller's client,
// so that it can check that closing a backend leaves the client, and every
// other backend over it, working (backend rule: Close releases only what
// the adapter created). Without it, that test fails unless declared with
// WithoutHooks("SharedClient").
func WithSharedClient(f NewSharedClient) Option {
	return func(s *suite) { s.sharedClient = f }
}

// testCloseKeepsClient closes one of two backends over one client and
// uses the other: an adapter that closed the caller's client (or a pool
// or connection the two share) fails it.
func (s *suite) testCloseKeepsClient(t *testing.T, ctx context.Context) {
	s.needHook(t, "SharedClient", s.sharedClient != nil)
	a, b := s.sharedClient(t)
	ch := prefix() + ":shared"
	subA, err := a.Subscribe(ctx, ch)
	must(t, err, "subscribe through the first backend")
	subB, err := b.Subscribe(ctx, ch)
	must(t, err, "subscribe through the second backend")
	defer subB.Close()
	must(t, a.Close(), "close the first backend")
	if _, err := subA.Receive(ctx); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Receive on the closed backend's subscription: %v, want ErrClosed", err)
	}
	v, err := b.Eval(ctx, backend.NewScript(`-- KEYS: none. Reply: 7.
return 7`), nil)
	if err != nil || v != int64(7) {
		t.Fatalf("Eval through the second backend after the first was closed: %v, %v: the adapter closed the caller's client", v, err)
	}
	if _, err := publish(ctx, b, ch, "still"); err != nil {
		t.Fatalf("publish through the second backend: %v", err)
	}
	if m, err := receive(ctx, subB, s.bound(5*time.Second)); err != nil || m.Payload != "still" {
		t.Fatalf("the second backend's subscription after the first was closed: %+v, %v", m, err)
	}
	// A new subscription after the close works too.
	sub2, err := b.Subscribe(ctx, ch+":2")
	must(t, err, "subscribe through the second backend after the close")
	sub2.Close()
}

// testCloseLeavesNothing uses a backend the way the primitives do (calls,
// cancelled calls, subscriptions, a receiver blocked in Receive, a hold
// renewed by the watchdog) and then closes it: no goroutine started after
// its first call may outlive Close, and its pub/sub connections leave the
// server. It runs alone, so that no other test's goroutines come and go.
func (s *suite) testCloseLeavesNothing(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	sc := backend.NewScript(`-- KEYS: none. Reply: 1.
return 1`)
	// The first call lets the client start whatever it starts lazily
	// (connection pools, topology refreshes): those are the caller's.
	if _, err := b.Eval(ctx, sc, nil); err != nil {
		t.Fatalf("first call: %v", err)
	}
	var pubsubBefore int
	countPubSub := s.hooks.PubSubClients != nil
	if countPubSub {
		n, err := s.hooks.PubSubClients(ctx)
		must(t, err, "count pub/sub connections")
		pubsubBefore = n
	}
	ignore := append([]goleak.Option{goleak.IgnoreCurrent()}, s.leakOpts...)

	p := prefix()
	var subs []backend.Subscription
	for i := 0; i < 3; i++ {
		sub, err := b.Subscribe(ctx, p+":c"+string(rune('a'+i)))
		must(t, err, "subscribe")
		subs = append(subs, sub)
	}
	subs[2].Close()
	blocked := make(chan error, 1)
	go func() {
		_, err := subs[0].Receive(ctx)
		blocked <- err
	}()
	for i := 0; i < 5; i++ {
		if _, err := b.Eval(ctx, sc, nil); err != nil {
			t.Fatalf("call: %v", err)
		}
	}
	// A call abandoned by its caller mid-flight.
	slow := backend.NewScript(`-- KEYS: none. Reply: 1, after a busy wait of ARGV[1] ms.
local t = redis.call('TIME')
local stop = t[1] * 1000 + t[2] / 1000 + tonumber(ARGV[1])
repeat t = redis.call('TIME') until t[1] * 1000 + t[2] / 1000 >= stop
return 1`)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if _, err := b.Eval(cctx, slow, nil, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Eval abandoned after 20ms of 100: %v, want context.DeadlineExceeded", err)
	}
	cancel()
	// A hold under the watchdog, taken and released.
	owner := dsync.WithOwner(ctx)
	m := mutex.New(b, p+":held")
	must(t, m.LockContext(owner), "lock")
	must(t, m.UnlockContext(owner), "unlock")

	must(t, b.Close(), "close")
	if err := within(t, s.bound(5*time.Second), blocked, "Receive blocked across Close"); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Receive after Close: %v, want ErrClosed", err)
	}
	// Close may leave the abandoned call to finish, but not past the
	// call's own reply: wait that long before looking.
	time.Sleep(s.bound(150 * time.Millisecond)) // time is what is tested: the abandoned call's 100ms
	if err := goleak.Find(ignore...); err != nil {
		t.Errorf("goroutines left behind by a closed backend: %v", err)
	}
	if countPubSub {
		deadline := time.Now().Add(s.bound(5 * time.Second))
		for i := 0; ; i++ {
			n, err := s.hooks.PubSubClients(ctx)
			must(t, err, "count pub/sub connections")
			if n <= pubsubBefore {
				break
			}
			if time.Now().After(deadline) || i > 100 {
				t.Errorf("%d pub/sub connections on the server after Close, %d before the backend subscribed", n, pubsubBefore)
				break
			}
			time.Sleep(50 * time.Millisecond) // the server notices a closed socket on its own time
		}
	}
}
