package semaphore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// evalCounter counts script calls, and passes the adapter's SET NX on, so
// that a plain Acquire is one SET NX.
type evalCounter struct {
	backend.Backend
	mu    sync.Mutex
	calls []int // the number of arguments of each script call
}

func (c *evalCounter) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.mu.Lock()
	c.calls = append(c.calls, len(args))
	c.mu.Unlock()
	return c.Backend.Eval(ctx, s, keys, args...)
}

func (c *evalCounter) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return c.Backend.(backend.Setter).SetNX(ctx, key, value, ttl)
}

func (c *evalCounter) during(t *testing.T, f func() error) []int {
	t.Helper()
	c.mu.Lock()
	n := len(c.calls)
	c.mu.Unlock()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls[n:]...)
}

// A partial release of an uncontended plain hold (Release(1) of an
// Acquire(2)) changes nothing on the server that the plain release could
// find: its plain value, that of a plain hold of 1 permit, cannot be at
// the state key. It should be one script call, the release script's, as
// it was before the plain release; the plain release sent first only
// misses and costs a round trip more.
func TestPartialReleaseIsOneScriptCall(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &evalCounter{Backend: srv.NewBackend(t)}
	s := semaphore.New(c, "partial-"+dsync.NewID()[:8], 3, semaphore.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	for i := range 2 { // the first round loads the scripts
		if err := s.Acquire(o, 2); err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			calls := c.during(t, func() error { return s.Release(o, 1) })
			if len(calls) != 1 {
				t.Errorf("round %d, Release(1) %d of an uncontended Acquire(2): %d script calls (arguments %v), want 1", i+1, j+1, len(calls), calls)
			}
		}
	}
}
