package semaphore_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"sync/atomic"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// At most three workers, in any number of processes, run at once.
func Example() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()
	sem := semaphore.New(b, "workers", 3)

	var running, peak atomic.Int64
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sem.Acquire(ctx, 1); err != nil {
				log.Print(err)
				return
			}
			defer sem.Release(ctx, 1)
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			running.Add(-1)
		}()
	}
	wg.Wait()
	fmt.Println(peak.Load() <= 3)
	// Output: true
}

// Permits belong to an owner: any goroutine of the request may give them
// back, and State reports them.
func ExampleSemaphore_State() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	req := dsync.WithOwner(context.Background())
	sem := semaphore.New(b, "licences", 5)

	if err := sem.Acquire(req, 2); err != nil {
		log.Fatal(err)
	}
	st, _ := sem.State(req)
	fmt.Println(st.Capacity, st.Held, st.Available, st.Permits)

	fmt.Println(sem.Release(req, 3) != nil) // more than held: ErrNotHeld
	sem.Release(req, 2)
	fmt.Println(sem.Available(req))
	// Output:
	// 5 2 3 2
	// true
	// 5 <nil>
}

// A capacity lowered at runtime takes nothing back from the holders, and
// lets nobody in until they are below it.
func ExampleSemaphore_SetCapacity() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()
	sem := semaphore.New(b, "uploads", 4)

	sem.Acquire(ctx, 3)
	sem.SetCapacity(ctx, 2)
	st, _ := sem.State(ctx)
	fmt.Println(st.Capacity, st.Held, st.Available)

	sem.Release(ctx, 2)
	ok, _ := sem.TryAcquire(ctx, 1) // 1 held of 2
	fmt.Println(ok)
	sem.Release(ctx, 2)
	sem.SetCapacity(ctx, 0) // back to the handles' own capacity
	fmt.Println(sem.Capacity(ctx))
	// Output:
	// 2 3 0
	// true
	// 4 <nil>
}
