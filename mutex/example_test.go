package mutex_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

func Example() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()

	var mu sync.Locker = mutex.New(b, "orders:42")
	mu.Lock()
	fmt.Println("updating order 42")
	mu.Unlock()
	// Output: updating order 42
}

func ExampleMutex_LockContext() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	mu := mutex.New(b, "report")

	// The owner lives in the context: nested calls with it re-enter.
	ctx := dsync.WithOwner(context.Background())
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // the longest wait
	defer cancel()

	if err := mu.LockContext(ctx); err != nil {
		log.Fatal(err)
	}
	defer mu.UnlockContext(ctx)

	if err := mu.LockContext(ctx); err != nil { // re-entry, no wait
		log.Fatal(err)
	}
	n, _ := mu.HoldCount(ctx)
	fmt.Println("holds:", n)
	mu.UnlockContext(ctx)
	// Output: holds: 2
}

func ExampleMutex_TryLockContext() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()

	first := mutex.New(b, "cron:nightly")
	second := mutex.New(b, "cron:nightly") // as another process would
	ok1, _ := first.TryLockContext(ctx)
	ok2, _ := second.TryLockContext(ctx)
	fmt.Println(ok1, ok2)
	first.UnlockContext(ctx)
	// Output: true false
}

func ExampleMutex_Token() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := dsync.WithOwner(context.Background())
	mu := mutex.New(b, "ledger")

	var highest int64 // kept by the protected resource
	write := func(token int64) error {
		if token < highest {
			return fmt.Errorf("stale token %d < %d", token, highest)
		}
		highest = token
		return nil
	}

	mu.LockContext(ctx)
	token, _ := mu.Token(ctx)
	fmt.Println(write(token))
	mu.UnlockContext(ctx)

	err := write(token - 1) // from a holder that outlived its lease
	fmt.Println("stale write rejected:", err != nil)
	// Output:
	// <nil>
	// stale write rejected: true
}

func ExampleMutex_Done() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := dsync.WithOwner(context.Background())
	mu := mutex.New(b, "job:7", mutex.WithLease(50*time.Millisecond))

	mu.LockContext(ctx)
	select {
	case <-mu.Done(ctx):
		fmt.Println("lease expired: stop working on job 7")
	case <-time.After(time.Second):
		fmt.Println("still holding")
	}
	// Output: lease expired: stop working on job 7
}
