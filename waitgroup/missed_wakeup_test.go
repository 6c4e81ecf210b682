package waitgroup_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/waitgroup"
)

// cutOff is a backend a test can cut off from its server as a partition
// does: while cut, script calls wait, and pub/sub messages are lost.
type cutOff struct {
	backend.Backend
	lost atomic.Bool
	mu   sync.Mutex
	gate chan struct{} // nil while connected
}

func (c *cutOff) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost.Store(true)
	c.gate = make(chan struct{})
}

func (c *cutOff) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost.Store(false)
	if c.gate != nil {
		close(c.gate)
		c.gate = nil
	}
}

func (c *cutOff) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.Backend.Eval(ctx, s, keys, args...)
}

func (c *cutOff) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	sub, err := c.Backend.Subscribe(ctx, channel)
	if err != nil {
		return nil, err
	}
	return &lossySub{Subscription: sub, c: c}, nil
}

type lossySub struct {
	backend.Subscription
	c *cutOff
}

func (s *lossySub) Receive(ctx context.Context) (backend.Message, error) {
	for {
		m, err := s.Subscription.Receive(ctx)
		if err != nil || !s.c.lost.Load() {
			return m, err
		}
	}
}

// A waiter cut off while its phase ends, and while many more phases with
// waiters end after it, learns on its return (well within its waiter
// timeout) that its phase ended: Wait returns nil, not ErrVanished.
// Before, the group remembered the ends of its last 8 phases only.
func TestWaitCutOffWhilePhasesEnd(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := prefix()
	owner := open(srv.NewBackend(t), p)
	helper := open(srv.NewBackend(t), p)
	link := &cutOff{Backend: srv.NewBackend(t)}
	t.Cleanup(link.heal)
	waiter := open(link, p, waitgroup.WithWaiterTimeout(5*time.Second))

	if err := owner.Add(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w := waitAsync(ctx, waiter)
	registered(t, ctx, owner, 1)
	link.cut()
	if err := owner.Done(ctx); err != nil { // the waiter's phase ends
		t.Fatal(err)
	}
	const phases = 20
	for range phases {
		if err := owner.Add(ctx, 1); err != nil {
			t.Fatal(err)
		}
		hw := waitAsync(ctx, helper)
		registered(t, ctx, owner, 1)
		if err := owner.Done(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-hw; r.err != nil {
			t.Fatalf("a helper's Wait: %v", r.err)
		}
	}
	select {
	case r := <-w:
		t.Fatalf("the cut-off Wait returned %v before it could reach the server", r.err)
	default:
	}
	link.heal()
	if r := <-w; r.err != nil {
		t.Fatalf("a Wait cut off while its phase and %d more ended: %v; want nil", phases, r.err)
	}
}
