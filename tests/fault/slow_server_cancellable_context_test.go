package fault

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/waitgroup"
)

// slowReplies is longer than wait.SettleGrace: a server that answers every
// call, only more slowly than that.
const slowReplies = wait.SettleGrace + 100*time.Millisecond

// slowOp is one operation of a primitive that sends an attempt: it returns
// the function that undoes it once it succeeded.
type slowOp struct {
	name string
	do   func(ctx context.Context, b backend.Backend, name string) (undo func(context.Context) error, err error)
}

func slowOps() []slowOp {
	return []slowOp{
		{"Mutex/LockContext", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			m := mutex.New(b, name, mutex.WithLogger(nil))
			return m.UnlockContext, m.LockContext(ctx)
		}},
		{"Mutex/TryLockContext", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			m := mutex.New(b, name, mutex.WithLogger(nil))
			ok, err := m.TryLockContext(ctx)
			if err == nil && !ok {
				err = errNotAcquired
			}
			return m.UnlockContext, err
		}},
		{"Fairlock/LockContext", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			m := fairlock.New(b, name, fairlock.WithLogger(nil))
			return m.UnlockContext, m.LockContext(ctx)
		}},
		{"RWMutex/LockContext", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			m := rwlock.New(b, name, rwlock.WithLogger(nil))
			return m.UnlockContext, m.LockContext(ctx)
		}},
		{"RWMutex/RLockContext", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			m := rwlock.New(b, name, rwlock.WithLogger(nil))
			return m.RUnlockContext, m.RLockContext(ctx)
		}},
		{"Semaphore/Acquire", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			s := semaphore.New(b, name, 2, semaphore.WithLogger(nil))
			return func(ctx context.Context) error { return s.Release(ctx, 1) }, s.Acquire(ctx, 1)
		}},
		{"Election/Campaign", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			e := election.New(b, name, election.WithLogger(nil))
			term, err := e.Campaign(ctx, "v")
			if err != nil {
				return nil, err
			}
			return term.Resign, nil
		}},
		{"WaitGroup/Add", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			g := waitgroup.New(b, name, waitgroup.WithLogger(nil))
			return g.Done, g.Add(ctx, 1)
		}},
		{"Multilock/All", func(ctx context.Context, b backend.Backend, name string) (func(context.Context) error, error) {
			l := multilock.All(mutex.New(b, name+":1", mutex.WithLogger(nil)), mutex.New(b, name+":2", mutex.WithLogger(nil)))
			return l.UnlockContext, l.LockContext(ctx)
		}},
	}
}

type notAcquired struct{}

func (notAcquired) Error() string { return "not acquired" }

var errNotAcquired error = notAcquired{}

// A server that answers every call, but each one after slowReplies, more
// than wait.SettleGrace (a loaded server, a distant one): an operation
// with a context that can be cancelled but has no deadline (a request's)
// succeeds, as it does with context.Background() or a deadline. Its
// attempts must not be cut off while ctx is alive: every one would fail,
// and a wait would never end.
func TestSlowServerCancellableContextSucceeds(t *testing.T) {
	srv := startServer(t)
	px := newProxy(t, srv.Addr())
	b := newBackend(t, px.Addr())
	for _, op := range slowOps() {
		t.Run(op.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
			defer cancel()
			stop := time.AfterFunc(3*time.Second, cancel) // the test's bound, not a deadline
			defer stop.Stop()
			end := px.Latency(t, slowReplies)
			start := time.Now()
			undo, err := op.do(ctx, b, "slow:"+op.name)
			took := time.Since(start)
			end()
			if err != nil {
				t.Fatalf("on a server answering every call in %v, with a live context: %v after %v; want success", slowReplies, err, took.Round(time.Millisecond))
			}
			if err := undo(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wait.Settle()
}
