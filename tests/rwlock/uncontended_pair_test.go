package rwlock_test

import (
	"context"
	"maps"
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// TestUncontendedPairCommands: an uncontended Lock+Unlock, and an
// uncontended RLock+RUnlock, each cost the server what the mutex's pair
// costs: four commands, one plain SET NX and a release script that GETs
// and DELs the hold.
func TestUncontendedPairCommands(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	for _, side := range []struct {
		name         string
		lock, unlock func(m *rwlock.RWMutex) error
	}{
		{"write", func(m *rwlock.RWMutex) error { return m.LockContext(ctx) }, func(m *rwlock.RWMutex) error { return m.UnlockContext(ctx) }},
		{"read", func(m *rwlock.RWMutex) error { return m.RLockContext(ctx) }, func(m *rwlock.RWMutex) error { return m.RUnlockContext(ctx) }},
	} {
		t.Run(side.name, func(t *testing.T) {
			m := rwlock.New(srv.NewBackend(t), "pair", rwlock.WithPrefix(prefix(t)), rwlock.WithLogger(nil))
			pair := func() {
				t.Helper()
				if err := side.lock(m); err != nil {
					t.Fatal(err)
				}
				if err := side.unlock(m); err != nil {
					t.Fatal(err)
				}
			}
			pair() // loads the scripts: not counted
			const pairs = 100
			want := map[string]int64{"set": pairs, "evalsha": pairs, "get": pairs, "del": pairs}
			// Counted three times and the fewest kept: INFO counts every
			// client's calls, and a stray one may fall in.
			var best map[string]int64
			var fewest int64 = -1
			for range 3 {
				before := commandsByName(t, srv)
				for range pairs {
					pair()
				}
				diff, sum := map[string]int64{}, int64(0)
				for name, n := range commandsByName(t, srv) {
					if d := n - before[name]; d != 0 {
						diff[name] = d
						sum += d
					}
				}
				if fewest < 0 || sum < fewest {
					best, fewest = diff, sum
				}
			}
			t.Logf("%d uncontended %s pairs: %d server commands %v", pairs, side.name, fewest, best)
			if fewest > 4*pairs || !maps.Equal(best, want) {
				t.Errorf("%d uncontended %s pairs cost %d server commands %v; want %d: %v", pairs, side.name, fewest, best, 4*pairs, want)
			}
		})
	}
}

// commandsByName returns the calls of each command the server ran,
// scripts' inner calls included, but for the subscriptions and PINGs that
// come and go on their own schedule (see testserver.Server.CommandCalls).
func commandsByName(t *testing.T, srv *testserver.Server) map[string]int64 {
	t.Helper()
	calls, err := srv.CommandCalls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"subscribe", "unsubscribe", "ping"} {
		delete(calls, name)
	}
	return calls
}
