package mutex_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

type markKey struct{}

// lossy runs the first Eval made with a marked ctx, then holds its reply
// until released and reports a transport error (reply lost).
type lossy struct {
	backend.Backend
	once    sync.Once
	applied chan struct{}
	proceed chan struct{}
}

func (l *lossy) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if ctx.Value(markKey{}) != nil {
		hit := false
		l.once.Do(func() { hit = true })
		if hit {
			l.Backend.Eval(ctx, s, keys, args...)
			close(l.applied)
			<-l.proceed
			return nil, errors.New("read tcp: i/o timeout")
		}
	}
	return l.Backend.Eval(ctx, s, keys, args...)
}

// Same owner, two goroutines: a re-entrant acquire whose reply is lost is
// retried after the owner's release overwrote the single 'op' field, so the
// retry counts a second time. The owner can never get back to zero holds
// and the watchdog keeps the mutex forever.
func TestRetriedReentryAfterConcurrentUnlockCountsOnce(t *testing.T) {
	b := &lossy{Backend: testserver.Real(t).NewBackend(t), applied: make(chan struct{}), proceed: make(chan struct{})}
	ctx := dsync.WithOwner(context.Background())
	m := mutex.New(b, "twice")
	if err := m.LockContext(ctx); err != nil { // hold 1
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- m.LockContext(context.WithValue(ctx, markKey{}, 1)) }() // hold 2, reply lost
	<-b.applied
	if err := m.UnlockContext(ctx); err != nil { // back to 1
		t.Fatal(err)
	}
	close(b.proceed)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// The owner took 2 holds and released 1: it should hold 1.
	n, err := m.HoldCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("server hold count %d, want 1 (lock 2x, unlock 1x)", n)
	}
	for i := 0; i < n; i++ {
		m.UnlockContext(ctx)
	}
}
