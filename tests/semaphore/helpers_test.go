package semaphore_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// elsewhere makes a backend act as if in a process of its own: scripts
// that hand permits to waiters are told the caller is another process, so
// they wake the waiters through pub/sub, and the caller does not see whom.
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
		_, id := a[1].(string) // a hand-off reply, not an acquisition's
		if _, address := a[2].(string); id && address {
			reply = a[:2]
		}
	}
	return reply, err
}

// queued waits, in a synctest bubble, until every goroutine is blocked, and
// checks that the acquisition reporting on got has not returned.
func queued(t *testing.T, got <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned at once: %v", err)
	default:
	}
}

func acquire(ctx context.Context, s *semaphore.Semaphore, n int64) <-chan error {
	got := make(chan error, 1)
	go func() { got <- s.Acquire(ctx, n) }()
	return got
}

type counting struct {
	backend.Backend
	calls *atomic.Int64
}

func (c counting) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.calls.Add(1)
	return c.Backend.Eval(ctx, s, keys, args...)
}

var errNet = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")

// within fails unless got reports success within d of start, and returns
// how long after start it did.
func within(t *testing.T, what string, got <-chan error, start time.Time, d time.Duration) time.Duration {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(time.Until(start.Add(d))):
		t.Fatalf("%s: not within %v", what, d)
	}
	return time.Since(start)
}

// idle fails if got reports anything now.
func idle(t *testing.T, what string, got <-chan error) {
	t.Helper()
	select {
	case err := <-got:
		t.Fatalf("%s returned: %v", what, err)
	default:
	}
}

// awaitState polls s's state until ok, for at most 5s.
func awaitState(t *testing.T, ctx context.Context, s *semaphore.Semaphore, what string, ok func(semaphore.State) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < 5000; i++ {
		st, err := s.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	st, _ := s.State(ctx)
	t.Fatalf("waiting until %s: state %+v", what, st)
}

// servers returns the real redis-server and the shared miniredis.
func servers(t *testing.T) map[string]func() backend.Backend {
	real, mini := testserver.Real(t), fake.Mini(t)
	return map[string]func() backend.Backend{
		"redis":     func() backend.Backend { return real.NewBackend(t) },
		"miniredis": func() backend.Backend { return mini.NewBackend(t) },
	}
}
