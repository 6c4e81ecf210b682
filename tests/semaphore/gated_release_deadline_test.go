package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// A release whose script call a paused path holds back (fake.Gated)
// returns by its ctx's deadline plus 100ms, matching
// context.DeadlineExceeded, and lands once the path lets it through: an
// ownerless Release(3) spread over two acquisitions, and an owner's.
func TestGatedReleaseKeepsDeadline(t *testing.T) {
	srv := fake.Mini(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "gated-" + dsync.NewID()[:8]
	g := fake.NewGated(t, srv.NewBackend(t))
	s := semaphore.New(g, name, 5, semaphore.WithWatchdog(3*time.Second), semaphore.WithLogger(nil))
	probe := semaphore.New(srv.NewBackend(t), name, 5)
	o := dsync.WithOwner(ctx)
	for _, a := range []struct {
		ctx context.Context
		n   int64
	}{{ctx, 2}, {ctx, 2}, {o, 1}} {
		if err := s.Acquire(a.ctx, a.n); err != nil {
			t.Fatal(err)
		}
	}
	g.HoldEvals()
	for _, r := range []struct {
		what string
		ctx  context.Context
		n    int64
	}{{"ownerless Release(3)", ctx, 3}, {"the owner's Release(1)", o, 1}} {
		dctx, dcancel := context.WithTimeout(r.ctx, 200*time.Millisecond)
		start := time.Now()
		err := s.Release(dctx, r.n)
		late := time.Since(start) - 200*time.Millisecond
		dcancel()
		t.Logf("%s: %v past the deadline: %v", r.what, late.Round(time.Millisecond), err)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with the path held: %v; want DeadlineExceeded", r.what, err)
		}
		if late > 150*time.Millisecond {
			t.Errorf("%s returned %v after its deadline; the contract is 100ms", r.what, late.Round(time.Millisecond))
		}
	}
	g.OpenEvals()
	awaitState(t, ctx, probe, "the releases landed", func(st semaphore.State) bool { return st.Held == 1 })
}
