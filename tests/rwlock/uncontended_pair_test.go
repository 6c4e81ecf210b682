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
			best, fewest, err := srv.FewestCalls(ctx, 3, func() {
				for range pairs {
					pair()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d uncontended %s pairs: %d server commands %v", pairs, side.name, fewest, best)
			if fewest > 4*pairs || !maps.Equal(best, want) {
				t.Errorf("%d uncontended %s pairs cost %d server commands %v; want %d: %v", pairs, side.name, fewest, best, 4*pairs, want)
			}
		})
	}
}
