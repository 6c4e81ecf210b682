package conformance

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/dsyncgo/dsync/backend"
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
