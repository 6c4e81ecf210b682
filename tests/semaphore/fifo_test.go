package semaphore_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// An Acquire(capacity) queued behind a stream of Acquire(1)/Release(1)
// from 6 goroutines (each its own handle and backend) is not passed: from
// the moment it is seen queued, the small requests granted before it are
// at most those queued ahead of it, one per goroutine; it acquires within
// 1s.
func TestLargeBehindStream(t *testing.T) {
	for kind, newBackend := range servers(t) {
		t.Run(kind, func(t *testing.T) {
			const capacity, smalls = 3, 6
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			name := "stream-" + dsync.NewID()[:8]
			open := func() *semaphore.Semaphore { return semaphore.New(newBackend(), name, capacity) }
			var (
				stop, bigDone atomic.Bool
				grants        atomic.Int64 // small grants while the big one is counted as queued
				counting      atomic.Bool
				held          atomic.Int64
				over          atomic.Int64
				wg            sync.WaitGroup
			)
			for range smalls {
				s := open()
				wg.Go(func() {
					for i := 0; i < 20000 && !stop.Load(); i++ {
						if err := s.Acquire(ctx, 1); err != nil {
							t.Errorf("small acquire: %v", err)
							return
						}
						if counting.Load() && !bigDone.Load() {
							grants.Add(1)
						}
						if held.Add(1) > capacity {
							over.Add(1)
						}
						time.Sleep(time.Duration(rand.N(1000)) * time.Microsecond)
						held.Add(-1)
						if err := s.Release(ctx, 1); err != nil {
							t.Errorf("small release: %v", err)
							return
						}
					}
				})
			}
			defer wg.Wait()
			defer stop.Store(true)
			time.Sleep(100 * time.Millisecond) // the stream flows
			big := open()
			o := dsync.WithOwner(ctx)
			var (
				start    time.Time
				got      <-chan error
				attempts int
			)
			// The stream may leave every permit free at the moment the big
			// request arrives, which then acquires at once: that attempt
			// is given back and the request made again, until it is seen
			// queued.
			for attempt := 1; !counting.Load(); attempt++ {
				attempts = attempt
				start = time.Now()
				got = acquire(o, big, capacity)
				for i := 0; ; i++ {
					st, err := big.State(o)
					if err != nil {
						t.Fatal(err)
					}
					if st.Position > 0 {
						counting.Store(true)
						break
					}
					select {
					case err := <-got:
						got = nil
						if err != nil {
							t.Fatal(err)
						}
					default:
					}
					if got == nil {
						break
					}
					if i > 1000 {
						t.Fatalf("the big request was neither seen queued nor acquired")
					}
					time.Sleep(100 * time.Microsecond)
				}
				if got == nil {
					if err := big.Release(o, capacity); err != nil {
						t.Fatal(err)
					}
					if attempt == 10 {
						t.Fatalf("Acquire(%d) acquired at once in %d attempts: never seen queued", capacity, attempt)
					}
				}
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Second):
				t.Fatalf("Acquire(%d) behind a stream of Acquire(1) from %d goroutines: not within 1s", capacity, smalls)
			}
			bigDone.Store(true)
			d := time.Since(start)
			if h := held.Load(); h != 0 {
				t.Errorf("%d small permits held while the big request holds all %d", h, capacity)
			}
			n := grants.Load()
			t.Logf("Acquire(%d) acquired after %v (attempt %d); %d small grants after it was seen queued", capacity, d, attempts, n)
			if n > smalls {
				t.Errorf("%d small grants after Acquire(%d) was queued: at most %d were queued ahead of it", n, capacity, smalls)
			}
			if err := big.Release(o, capacity); err != nil {
				t.Fatal(err)
			}
			stop.Store(true)
			wg.Wait()
			if n := over.Load(); n > 0 {
				t.Errorf("%d times more than %d permits held", n, capacity)
			}
		})
	}
}

// TryAcquire does not pass a queued waiter, even when its permits are
// free: a waiter for 3 of 3, behind a holder of 2, keeps the last permit
// from everybody.
func TestTryAcquireDoesNotPassQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		holder := semaphore.New(fake.FakeBackend(t, srv), "try", 3)
		if err := holder.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		big := semaphore.New(fake.FakeBackend(t, srv), "try", 3)
		got := acquire(ctx, big, 3)
		queued(t, got)
		small := semaphore.New(fake.FakeBackend(t, srv), "try", 3)
		if ok, err := small.TryAcquire(ctx, 1); ok || err != nil {
			t.Errorf("TryAcquire(1) past a queued Acquire(3) = %v, %v; want false", ok, err)
		}
		sgot := acquire(ctx, small, 1)
		queued(t, sgot)
		if err := holder.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		queued(t, sgot)
		if err := big.Release(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if err := <-sgot; err != nil {
			t.Fatal(err)
		}
		small.Release(ctx, 1)
	})
}
