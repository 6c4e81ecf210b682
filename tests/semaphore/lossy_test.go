package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// lossy runs every script but, one time in ten, reports its reply lost,
// as a timeout does: the caller cannot tell whether it ran.
type lossy struct{ backend.Backend }

var errLost = errors.New("reply lost in transit")

func (l lossy) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	reply, err := l.Backend.Eval(ctx, s, keys, args...)
	if err == nil && rand.N(10) == 0 {
		return nil, errLost
	}
	return reply, err
}

// Permits never exceed the capacity, and all come back, when one reply in
// ten is lost on acquisitions, releases and the clean-ups of waits given
// up: retries with the same operation id apply once.
func TestLostRepliesNeverExceedCapacity(t *testing.T) {
	const capacity, workers = 2, 6
	srv := testserver.Real(t)
	ctx := context.Background()
	p := "semlossy:" + time.Now().Format("150405.000000")
	var held, peak atomic.Int64
	var over atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(1500 * time.Millisecond)
	for i := range workers {
		s := semaphore.New(lossy{srv.NewBackend(t)}, "sem", capacity, semaphore.WithPrefix(p), semaphore.WithLogger(nil))
		wg.Go(func() {
			for j := 0; j < 2000 && time.Now().Before(stop); j++ {
				actx, cancel := context.WithTimeout(ctx, time.Duration(20+rand.N(200))*time.Millisecond)
				err := s.Acquire(actx, 1)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errLost) {
						t.Errorf("worker %d: acquire: %v", i, err)
					}
					continue
				}
				n := held.Add(1)
				if n > capacity {
					over.Add(1)
				}
				for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
				}
				time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
				held.Add(-1)
				if err := s.Release(ctx, 1); err != nil && !errors.Is(err, errLost) {
					t.Errorf("worker %d: release: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("%d times more than %d permits were held", n, capacity)
	}
	probe := semaphore.New(srv.NewBackend(t), "sem", capacity, semaphore.WithPrefix(p))
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := probe.Available(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == capacity {
			break
		}
		if time.Now().After(deadline) {
			st, _ := probe.State(ctx)
			t.Fatalf("after every worker released: %d of %d permits available; state %+v", n, capacity, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("peak %d permits held of %d", peak.Load(), capacity)
}
