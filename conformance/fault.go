package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// fault is what stands between a faulty backend and its server.
type fault int

const (
	noFault   fault = iota
	partition       // calls are held before they reach the server
	stall           // calls run on the server; their replies are held
)

func (f fault) String() string {
	switch f {
	case partition:
		return "partitioned"
	case stall:
		return "stalled"
	}
	return "healthy"
}

// faulty wraps a backend to cut it off from its server with no help from
// the harness, so that the suite can run on any adapter: a partition
// holds calls before they reach the server, a stall runs them and holds
// their replies (the server applied them; the client does not know).
// Either way a held call ends when its context does, by cancellation or
// by deadline (a context whose Done is nil may still have one, see
// backend rule 7), with an error matching the context's, as an adapter's
// call does when its connection times out. Heal lets the held calls go
// on. Renewals go through it too, so a partitioned holder's hold expires
// on the server as it would behind a real partition.
//
// It passes Sharded on and hides Batcher, so that every call is an Eval it
// sees.
type faulty struct {
	backend.Backend

	mu      sync.Mutex
	fault   fault         // what calls made now meet
	gate    chan struct{} // closed by heal: the held calls go on
	held    int           // Evals held since the fault began
	changed chan struct{} // closed and replaced when held grows
}

func newFaulty(b backend.Backend) *faulty {
	return &faulty{Backend: b, gate: make(chan struct{}), changed: make(chan struct{})}
}

func (f *faulty) Sharded() bool { return backend.IsSharded(f.Backend) }

// start makes the calls made from now on meet the fault.
func (f *faulty) start(ft fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault, f.held = ft, 0
}

// admit lets the calls made from now on through, while those already held
// stay held until heal: a reply still in flight when the network is back.
func (f *faulty) admit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = noFault
}

// heal ends the fault: held calls go on, and new ones pass.
func (f *faulty) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = noFault
	close(f.gate)
	f.gate = make(chan struct{})
}

// enter returns the fault a call made now meets, and the gate it waits
// for, counting it if it is an Eval held.
func (f *faulty) enter(eval bool) (fault, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fault != noFault && eval {
		f.held++
		close(f.changed)
		f.changed = make(chan struct{})
	}
	return f.fault, f.gate
}

// awaitHeld waits until n Evals have been held since the fault began.
func (f *faulty) awaitHeld(t *testing.T, n int, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		f.mu.Lock()
		held, changed := f.held, f.changed
		f.mu.Unlock()
		if held >= n {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("%d calls held within %v, want %d", held, d, n)
		}
	}
}

// holdAt holds a call at gate until it opens or ctx ends.
func holdAt(ctx context.Context, ft fault, gate <-chan struct{}) error {
	var expired <-chan time.Time
	if d, ok := ctx.Deadline(); ok {
		timer := time.NewTimer(time.Until(d))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("conformance: %s: %w", ft, ctx.Err())
	case <-expired:
		return fmt.Errorf("conformance: %s: %w", ft, context.DeadlineExceeded)
	}
}

func (f *faulty) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	ft, gate := f.enter(true)
	switch ft {
	case partition:
		if err := holdAt(ctx, ft, gate); err != nil {
			return nil, err
		}
	case stall:
		reply, err := f.Backend.Eval(ctx, s, keys, args...)
		if werr := holdAt(ctx, ft, gate); werr != nil {
			return nil, werr
		}
		return reply, err
	}
	return f.Backend.Eval(ctx, s, keys, args...)
}

func (f *faulty) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	ft, gate := f.enter(false)
	switch ft {
	case partition:
		if err := holdAt(ctx, ft, gate); err != nil {
			return nil, err
		}
	case stall:
		sub, err := f.Backend.Subscribe(ctx, channel)
		if werr := holdAt(ctx, ft, gate); werr != nil {
			if err == nil {
				sub.Close()
			}
			return nil, werr
		}
		return sub, err
	}
	return f.Backend.Subscribe(ctx, channel)
}
