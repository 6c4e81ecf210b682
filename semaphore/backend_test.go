package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/dsyncgo/dsync/backend"
)

// countingBackend fails every call, counting them.
type countingBackend struct{ calls *atomic.Int64 }

var errNoIO = errors.New("no I/O expected")

func (c *countingBackend) Eval(context.Context, *backend.Script, []string, ...any) (any, error) {
	c.calls.Add(1)
	return nil, errNoIO
}

func (c *countingBackend) Subscribe(context.Context, string) (backend.Subscription, error) {
	c.calls.Add(1)
	return nil, errNoIO
}

func (c *countingBackend) Close() error { return nil }
