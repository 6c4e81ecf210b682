package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
)

// Defects 1 and 2. While the server is stalled, LockContext and
// TryLockContext honour the caller's deadline: they return at most half a
// second after it, as documented, with an error that matches
// context.DeadlineExceeded and not context.Canceled. The clean-up of the
// failed attempt goes on in the background, and once the server answers
// again nothing is left held.
//
// Before the fix, both returned some 1.7 s late with a 2 s stall (the
// clean-up waited synchronously for the server), and TryLockContext's
// error matched context.Canceled.
func TestStallDeadline(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	const (
		trials   = 3
		deadline = 300 * time.Millisecond
		bound    = 500 * time.Millisecond // the documented overrun
	)
	calls := []struct {
		name string
		call func(ctx context.Context, m *mutex.Mutex) error
	}{
		{"LockContext", func(ctx context.Context, m *mutex.Mutex) error { return m.LockContext(ctx) }},
		{"TryLockContext", func(ctx context.Context, m *mutex.Mutex) error {
			ok, err := m.TryLockContext(ctx)
			if ok {
				return errors.New("acquired on a stalled server")
			}
			return err
		}},
	}
	for _, c := range calls {
		var overruns []time.Duration
		for i := range trials {
			m := mutex.New(b, fmt.Sprintf("stall:%s:%d", c.name, i), mutex.WithLogger(nil))
			end := pauseServer(t, srv, "DEBUG SLEEP", 2*time.Second)
			ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), deadline)
			// The overrun counted is less however long the process went
			// without running meanwhile (a loaded machine): the bound is
			// on the call, which returns about 450ms late by design.
			hb := startHeartbeat()
			start := time.Now()
			err := c.call(ctx, m)
			took := time.Since(start)
			stall := hb.stop()
			overrun := took - deadline - maxGap(stall, start, start.Add(took))
			cancel()
			overruns = append(overruns, overrun)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Errorf("%s on a stalled server past its deadline: %v; want an error matching context.DeadlineExceeded only", c.name, err)
			}
			end()
			wait.Settle()
			checkFree(t, m)
		}
		slices.Sort(overruns)
		t.Logf("%s, %v deadline, server stalled 2 s: overrun (less the process's stalls) min %v, max %v over %d trials (bound %v)",
			c.name, deadline, overruns[0].Round(time.Millisecond), overruns[len(overruns)-1].Round(time.Millisecond), trials, bound)
		if worst := overruns[len(overruns)-1]; worst > bound {
			t.Errorf("%s returned %v after its deadline; the bound is %v", c.name, worst, bound)
		}
	}
}

// Defect 2, for UnlockContext, and the other cases. Past the caller's
// deadline, UnlockContext on a stalled server returns an error matching
// context.DeadlineExceeded and not context.Canceled; a cancelled ctx
// gives context.Canceled and not context.DeadlineExceeded; the hold is
// still released once the server answers.
func TestErrorKinds(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())

	t.Run("UnlockContextDeadline", func(t *testing.T) {
		// The call keeps its deadline (plus core.ReturnGrace); the
		// release goes on in the background, bounded by its own timeout
		// and the lease: a fixed lease of 1 s ends first, and the hold
		// expires by itself.
		const lease = time.Second
		const deadline = 300 * time.Millisecond
		m := mutex.New(b, "kinds:unlock", mutex.WithLease(lease), mutex.WithLogger(nil))
		owner := dsync.WithOwner(context.Background())
		if err := m.LockContext(owner); err != nil {
			t.Fatal(err)
		}
		end := pauseServer(t, srv, "DEBUG SLEEP", 2*time.Second)
		ctx, cancel := context.WithTimeout(owner, deadline)
		start := time.Now()
		err := m.UnlockContext(ctx)
		took := time.Since(start)
		cancel()
		t.Logf("UnlockContext, %v deadline, fixed lease %v, server stalled 2 s: returned after %v: %v", deadline, lease, took.Round(time.Millisecond), err)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Errorf("UnlockContext past its deadline: %v; want an error matching context.DeadlineExceeded only", err)
		}
		if limit := deadline + core.ReturnGrace + 50*time.Millisecond; took > limit {
			t.Errorf("UnlockContext took %v; want at most its deadline plus %v", took, core.ReturnGrace)
		}
		wait.Settle() // the release in the background gives up past the lease
		select {
		case <-m.Done(owner):
		default:
			t.Error("Done is open after the release failed in the background")
		}
		end()
		checkFree(t, m)
	})

	t.Run("Cancelled", func(t *testing.T) {
		m := mutex.New(b, "kinds:cancel", mutex.WithLogger(nil))
		owner := dsync.WithOwner(context.Background())
		end := pauseServer(t, srv, "DEBUG SLEEP", time.Second)
		ctx, cancel := context.WithCancel(owner)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() { defer wg.Done(); errs[0] = m.LockContext(ctx) }()
		go func() { defer wg.Done(); _, errs[1] = m.TryLockContext(ctx) }()
		time.Sleep(100 * time.Millisecond) // both calls are on the server
		cancel()
		wg.Wait()
		end()
		wait.Settle()
		for i, name := range []string{"LockContext", "TryLockContext"} {
			if !errors.Is(errs[i], context.Canceled) || errors.Is(errs[i], context.DeadlineExceeded) {
				t.Errorf("%s with a cancelled ctx: %v; want an error matching context.Canceled only", name, errs[i])
			}
		}
		checkFree(t, m)
	})
}

// checkFree fails t unless m is neither held nor waited for on the server.
func checkFree(t *testing.T, m *mutex.Mutex) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := m.State(ctx)
	if err != nil || s.Locked || s.Waiters != 0 {
		t.Errorf("%s: state %+v, %v; want it free, with no waiter", m.Name(), s, err)
	}
}
