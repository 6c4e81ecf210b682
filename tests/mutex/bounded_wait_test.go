package mutex_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// TestWaiterAmongGreedyClientsWaitsBounded: clients with a backend value
// each (as processes) lock and unlock one mutex back to back, each hold
// as short as a round trip; a waiter that locks among them now and then
// waits at most the hand-off threshold plus the holds of the waiters
// queued before it and one newcomer's: in hand-off mode, a release hands
// the mutex to the head, and a newcomer that finds it free hands it over.
func TestWaiterAmongGreedyClientsWaitsBounded(t *testing.T) {
	srv := testserver.Real(t)
	const greedy = 4
	name := uniqueName("bounded")
	var (
		wg    sync.WaitGroup
		stop  atomic.Bool
		turns atomic.Int64
	)
	for range greedy {
		m := mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil))
		wg.Go(func() {
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := m.LockContext(ctx)
				if err == nil {
					turns.Add(1)
					err = m.UnlockContext(ctx)
				}
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	w := mutex.New(srv.NewBackend(t), name, mutex.WithLogger(nil))
	var waits []time.Duration
	for range 40 {
		time.Sleep(5 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := w.LockContext(ctx)
		waits = append(waits, time.Since(start))
		if err == nil {
			err = w.UnlockContext(ctx)
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(waits)
	t.Logf("waiter's 40 waits among %d greedy clients (%d of their turns): p50 %v, p90 %v, max %v", greedy, turns.Load(),
		waits[len(waits)/2], waits[len(waits)*9/10], waits[len(waits)-1])
	// The bound: 1ms threshold, then at most the greedy clients' holds
	// queued before it (a round trip or two each), generously.
	if max := waits[len(waits)-1]; max > 500*time.Millisecond {
		t.Errorf("the waiter waited up to %v among greedy clients; the hand-off threshold bounds it to a few ms past 1ms", max)
	}
}
