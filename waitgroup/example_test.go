package waitgroup_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/waitgroup"
)

// Three workers, each in a process of its own in production, add a unit
// before they start and count it down when they finish; a coordinator
// waits for all of them.
func Example() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()

	done := make(chan int, 3)
	for i := range 3 {
		wg := waitgroup.New(b, "shards") // one handle per process
		if err := wg.Add(ctx, 1); err != nil {
			log.Fatal(err)
		}
		go func() {
			defer wg.Done(ctx)
			done <- i // the shard's work
		}()
	}
	if err := waitgroup.New(b, "shards").Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("all shards done:", len(done))
	// Output: all shards done: 3
}

// A worker that dies before its Done (here: one whose fixed lease runs
// out) is reported to the waiters, instead of keeping them waiting.
func ExampleAbandonedError() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()

	worker := waitgroup.New(b, "regions", waitgroup.WithLease(100*time.Millisecond))
	worker.Add(ctx, 2) // and never counted down

	err := waitgroup.New(b, "regions").Wait(ctx)
	var ab *waitgroup.AbandonedError
	fmt.Println(errors.Is(err, dsync.ErrAbandoned), errors.As(err, &ab) && ab.Owner == worker.Owner(), ab.Units)
	// Output: true true 2
}
