package mutex_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// TestPlainAgainAfterContention: a handle whose acquisitions found the
// mutex held asks the acquire script first, until the script's plain
// reply says it found the mutex free; from then on every uncontended Lock
// is one SET NX again, and a Lock and Unlock are four server commands.
func TestPlainAgainAfterContention(t *testing.T) {
	testserver.Real(t) // skips without redis-server
	srv, err := testserver.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, owned := range []bool{false, true} {
		name := "again-" + dsync.NewID()[:8]
		other := mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil))
		c := &testserver.SetterCounting{Backend: srv.NewBackend(t)}
		m := mutex.New(c, name, mutex.WithLogger(nil))
		lctx := ctx
		if owned {
			lctx = dsync.WithOwner(ctx)
		}
		// A contended period: a failed TryLock, then a Lock that waits
		// and is woken by the other's Unlock.
		if err := other.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := m.TryLockContext(lctx); ok || err != nil {
			t.Fatalf("TryLock of a held mutex = %v, %v", ok, err)
		}
		got := make(chan error, 1)
		go func() { got <- m.LockContext(lctx) }()
		for i := 0; ; i++ {
			st, err := other.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Waiters == 1 {
				break
			}
			if i == 5000 {
				t.Fatalf("the waiter not queued: %+v", st)
			}
			time.Sleep(time.Millisecond)
		}
		if err := other.UnlockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if err := m.UnlockContext(lctx); err != nil {
			t.Fatal(err)
		}

		// The first Lock after the contended period asks the script,
		// whose plain reply turns the handle back to SET NX.
		if err := m.LockContext(lctx); err != nil {
			t.Fatal(err)
		}
		if err := m.UnlockContext(lctx); err != nil {
			t.Fatal(err)
		}
		const pairs = 100
		calls, total, err := srv.FewestCalls(ctx, 3, func() {
			for i := range pairs {
				evals, sets := c.Evals.Load(), c.Sets.Load()
				if err := m.LockContext(lctx); err != nil {
					t.Fatal(err)
				}
				if de, ds := c.Evals.Load()-evals, c.Sets.Load()-sets; de != 0 || ds != 1 {
					t.Fatalf("owner %v: uncontended Lock %d after a contended period: %d script calls and %d SET NX, want one SET NX", owned, i+2, de, ds)
				}
				if err := m.UnlockContext(lctx); err != nil {
					t.Fatal(err)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		var by []string
		for cmd, d := range calls {
			by = append(by, fmt.Sprintf("%s %.2f", cmd, float64(d)/pairs))
		}
		slices.Sort(by)
		t.Logf("owner %v: %.2f commands per Lock+Unlock: %s", owned, float64(total)/pairs, strings.Join(by, ", "))
		if total > 4*pairs {
			t.Errorf("owner %v: %d commands for %d uncontended pairs, want at most 4 per pair: %s", owned, total, pairs, strings.Join(by, ", "))
		}
	}
}
