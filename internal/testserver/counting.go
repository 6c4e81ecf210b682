package testserver

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// SetterCounting wraps a backend that implements backend.Setter, counting
// its script calls and its SET NX calls apart: a test of which path an
// acquisition takes (a plain SET NX, or the script) reads them.
type SetterCounting struct {
	backend.Backend
	Evals, Sets atomic.Int64
}

func (c *SetterCounting) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.Evals.Add(1)
	return c.Backend.Eval(ctx, s, keys, args...)
}

func (c *SetterCounting) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	c.Sets.Add(1)
	return c.Backend.(backend.Setter).SetNX(ctx, key, value, ttl)
}
