package mutex_test

import (
	"context"
	"testing"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/session"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// TestUncontendedPairSchedulerLockCount: every lock and unlock of a
// backend value takes its session's lease scheduler lock, which all of
// them share, so the goroutines of a process that share a backend queue
// for it under load. An uncontended ownerless Lock+Unlock takes it three
// times: to keep the lease, to record the release beginning, and to
// settle it; with an owner twice more (it took it seven and nine times
// when each question of the release was asked apart). A fraction more is
// let pass: the session's idle timer, armed by the first pair, may fire
// during the pairs on a slow machine.
func TestUncontendedPairSchedulerLockCount(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want uint64
	}{
		{"ownerless", context.Background(), 3},
		// The lock asks whether the owner holds already (a re-entry),
		// the unlock finds the owner's hold in the scheduler's index.
		{"owner", dsync.WithOwner(context.Background()), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mutex.New(b, uniqueName("schedlock"))
			pair := func() {
				if err := m.LockContext(tc.ctx); err != nil {
					t.Fatal(err)
				}
				if err := m.UnlockContext(tc.ctx); err != nil {
					t.Fatal(err)
				}
			}
			pair() // the session starts
			sched := session.Lookup(b).Sched
			const pairs = 20
			before := sched.LockCount()
			for range pairs {
				pair()
			}
			got := float64(sched.LockCount()-before) / pairs
			if got > float64(tc.want)+0.5 {
				t.Errorf("an uncontended Lock+Unlock took the scheduler's lock %.2f times; want at most %d", got, tc.want)
			}
			t.Logf("%.2f times per pair", got)
		})
	}
}
