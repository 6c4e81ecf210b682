package rwlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// TestMixedPreferencesKeepExclusion: handles with reader and with writer
// preference on one name (doc: "every handle on a name should agree"; each
// acquisition follows its own handle's preference). Documented effect:
// reader-preference readers ignore queued writers, so writers, and
// writer-preference readers queued behind them, may wait as long as
// reader-preference reads overlap; waits that time out are only logged.
// What must hold whatever the mix: never a writer with any other holder,
// owners' downgrades and re-entries included; once the load stops, the
// lock ends free, a writer and a reader get in, and no key is left.
func TestMixedPreferencesKeepExclusion(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	open := func(readerPref bool) *rwlock.RWMutex {
		opts := []rwlock.Option{rwlock.WithPrefix(p), rwlock.WithLogger(nil), rwlock.WithWaiterTimeout(time.Second)}
		if readerPref {
			opts = append(opts, rwlock.WithReaderPreference())
		}
		return rwlock.New(srv.NewBackend(t), "mixed", opts...)
	}
	var (
		mu               sync.Mutex
		readers, writers int
		timeouts         atomic.Int32
		ops              atomic.Int32
	)
	enter := func(write bool) {
		mu.Lock()
		defer mu.Unlock()
		if write {
			if writers != 0 || readers != 0 {
				t.Errorf("a writer got in with %d writers and %d readers inside", writers, readers)
			}
			writers++
		} else {
			if writers != 0 {
				t.Errorf("a reader got in with a writer inside")
			}
			readers++
		}
	}
	leave := func(write bool) {
		mu.Lock()
		defer mu.Unlock()
		if write {
			writers--
		} else {
			readers--
		}
	}
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for i := range 8 {
		m := open(i%2 == 0)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for time.Now().Before(stop) {
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				o := dsync.WithOwner(actx)
				write := rng.IntN(3) == 0
				var err error
				if write {
					err = m.LockContext(o)
				} else {
					err = m.RLockContext(o)
				}
				if err != nil {
					cancel()
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("goroutine %d: %v", i, err)
						return
					}
					timeouts.Add(1)
					continue
				}
				ops.Add(1)
				enter(write)
				downgrade := write && rng.IntN(2) == 0
				if downgrade {
					if err := m.RLockContext(o); err != nil {
						t.Errorf("downgrade: %v", err)
					}
				} else if !write && rng.IntN(3) == 0 {
					if err := m.RLockContext(o); err != nil { // re-entry
						t.Errorf("read re-entry: %v", err)
					}
					m.RUnlockContext(o)
				}
				time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
				leave(write)
				if write {
					if err := m.UnlockContext(o); err != nil {
						t.Errorf("Unlock: %v", err)
					}
					if downgrade {
						enter(false)
						time.Sleep(500 * time.Microsecond)
						leave(false)
						m.RUnlockContext(o)
					}
				} else if err := m.RUnlockContext(o); err != nil {
					t.Errorf("RUnlock: %v", err)
				}
				cancel()
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	t.Logf("%d holds taken, %d waits timed out", ops.Load(), timeouts.Load())
	probe := open(false)
	await(t, ctx, probe, "free at the end", func(s rwlock.State) bool {
		return s.Mode == rwlock.Free && s.WaitingReaders == 0 && s.WaitingWriters == 0
	})
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := probe.LockContext(lctx); err != nil {
		t.Fatalf("Lock at the end: %v", err)
	}
	probe.Unlock()
	if err := probe.RLockContext(lctx); err != nil {
		t.Fatalf("RLock at the end: %v", err)
	}
	probe.RUnlock()
	if bad := keysLeft(t, srv, p); len(bad) > 0 {
		t.Errorf("keys left: %v", bad)
	}
}
