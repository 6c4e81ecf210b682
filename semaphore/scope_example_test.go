package semaphore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

func ExampleSemaphore_AcquireScope() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	sem := semaphore.New(b, "exports", 4)

	ctx, release, err := sem.AcquireScope(context.Background(), 3)
	if err != nil {
		log.Fatal(err)
	}
	// Work with ctx stops if the permits are lost.
	left, _ := sem.Available(ctx)
	fmt.Println("available while held:", left)
	release()
	left, _ = sem.Available(context.Background())
	fmt.Println("available after release:", left)
	// Output:
	// available while held: 1
	// available after release: 4
}
