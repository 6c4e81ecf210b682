package testserver

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// SetterCounting wraps a backend that implements backend.Setter, counting
// its script calls and its SET NX calls apart: a test of which path an
// acquisition takes (a plain SET NX, or the script) reads them. A
// SetNXPublish counts as a SET NX: its PUBLISH is not a script call.
type SetterCounting struct {
	backend.Backend
	Evals, Sets atomic.Int64
}

var _ backend.SetPublisher = (*SetterCounting)(nil)

func (c *SetterCounting) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.Evals.Add(1)
	return c.Backend.Eval(ctx, s, keys, args...)
}

func (c *SetterCounting) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	c.Sets.Add(1)
	return c.Backend.(backend.Setter).SetNX(ctx, key, value, ttl)
}

// SetNXPublish forwards to the wrapped backend's. SetterCounting always
// implements backend.SetPublisher, so that the tests that count calls see
// the path dsync takes with the shipped adapters, which all implement it;
// wrapping a backend that does not, it fails every call with an error
// matching dsync.ErrInvalidBackend rather than send the two commands
// another way.
func (c *SetterCounting) SetNXPublish(ctx context.Context, key, value string, ttl time.Duration, channel, message string) (bool, error) {
	sp, ok := c.Backend.(backend.SetPublisher)
	if !ok {
		return false, fmt.Errorf("%w: testserver: SetterCounting wraps a %T, which does not implement backend.SetPublisher", dsync.ErrInvalidBackend, c.Backend)
	}
	c.Sets.Add(1)
	return sp.SetNXPublish(ctx, key, value, ttl, channel, message)
}
