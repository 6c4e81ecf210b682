package mutex_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// Clients in processes of their own (a backend value each) that lock and
// unlock one mutex in a loop all get it, in shares of the same order: a
// waiter whose first attempt was a plain SET that found the mutex held,
// already subscribed to its channel from an earlier wait, registers at
// once rather than sleep out its heartbeat while the others take turns.
func TestNoClientStarvesBehindPlainAcquisitions(t *testing.T) {
	srv := testserver.Real(t)
	const clients = 4
	var (
		wg     sync.WaitGroup
		stop   atomic.Bool
		counts [clients]atomic.Int64
	)
	for i := range clients {
		m := mutex.New(srv.NewBackend(t), "turns")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := m.LockContext(ctx)
				if err == nil {
					counts[i].Add(1)
					err = m.UnlockContext(ctx)
				}
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	var total, least int64 = 0, -1
	for i := range clients {
		n := counts[i].Load()
		total += n
		if least < 0 || n < least {
			least = n
		}
	}
	t.Logf("acquisitions per client in 1.5s: %d %d %d %d", counts[0].Load(), counts[1].Load(), counts[2].Load(), counts[3].Load())
	if least*clients*4 < total {
		t.Errorf("the least served client got %d of %d acquisitions, under a quarter of its share", least, total)
	}
}
