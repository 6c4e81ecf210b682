package conformance

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
)

// spy wraps a backend to count what primitives send and to lose replies on
// demand, the way a timeout does: the script runs, the caller never hears.
type spy struct {
	backend.Backend

	mu       sync.Mutex
	evals    int
	keyEvals map[string]int // evals that touched a key
	loseNext int            // replies still to lose
}

var errReplyLost = errors.New("conformance: reply lost in transit")

func newSpy(b backend.Backend) *spy {
	return &spy{Backend: b, keyEvals: make(map[string]int)}
}

func (s *spy) Eval(ctx context.Context, sc *backend.Script, keys []string, args ...any) (any, error) {
	s.mu.Lock()
	s.evals++
	for _, k := range slices.Compact(slices.Sorted(slices.Values(keys))) {
		s.keyEvals[k]++
	}
	lose := s.loseNext > 0
	if lose {
		s.loseNext--
	}
	s.mu.Unlock()
	reply, err := s.Backend.Eval(ctx, sc, keys, args...)
	if lose && err == nil {
		return nil, errReplyLost
	}
	return reply, err
}

// loseReplies makes the next n Evals run but report a lost reply.
func (s *spy) loseReplies(n int) {
	s.mu.Lock()
	s.loseNext = n
	s.mu.Unlock()
}

func (s *spy) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evals
}

// touched returns how many Evals named key.
func (s *spy) touched(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keyEvals[key]
}

// elsewhere makes a backend act as if in a process of its own: scripts
// that hand a primitive to a waiter are told the caller's hub is another,
// so they wake the waiter through pub/sub, and the caller does not see
// whom they woke. Tests use it to exercise the adapter's pub/sub
// with waiters that share the test's process.
type elsewhere struct{ backend.Backend }

func (e elsewhere) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	args = slices.Clone(args)
	for i, a := range args {
		if id, ok := a.(string); ok && hub.IsID(id) {
			args[i] = "elsewhere"
		}
	}
	reply, err := e.Backend.Eval(ctx, s, keys, args...)
	if a, ok := reply.([]any); ok && len(a) >= 5 {
		_, id := a[1].(string) // not an acquisition's hold count
		if _, address := a[2].(string); id && address {
			reply = a[:2]
		}
	}
	return reply, err
}

// Wrappers pass on what the wrapped backend declares: a wrapper that hid
// Sharded would make a cluster refuse its batched renewals.

func (s *spy) Sharded() bool      { return backend.IsSharded(s.Backend) }
func (e elsewhere) Sharded() bool { return backend.IsSharded(e.Backend) }

// stalled wraps a backend whose script calls wait while it is shut, as
// those of a process stalled between two attempts: a waiter on it keeps
// its place, its entry living the waiter timeout, and makes no attempt.
type stalled struct {
	backend.Backend

	mu   sync.Mutex
	gate chan struct{} // nil while open
}

// newStalled returns b wrapped, open, and opened when t ends.
func newStalled(t *testing.T, b backend.Backend) *stalled {
	s := &stalled{Backend: b}
	t.Cleanup(s.open)
	return s
}

func (s *stalled) shut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

func (s *stalled) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// Eval runs the script once the wrapper is open, or fails when ctx ends:
// at its deadline too when it can never be done (Done returns nil), as
// dsync's releases and renewals pass (rule 7 of package backend).
func (s *stalled) Eval(ctx context.Context, sc *backend.Script, keys []string, args ...any) (any, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		var expiry <-chan time.Time
		if d, ok := ctx.Deadline(); ok && ctx.Done() == nil {
			t := time.NewTimer(time.Until(d))
			defer t.Stop()
			expiry = t.C
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-expiry:
			return nil, context.DeadlineExceeded
		}
	}
	return s.Backend.Eval(ctx, sc, keys, args...)
}

func (s *stalled) Sharded() bool { return backend.IsSharded(s.Backend) }
