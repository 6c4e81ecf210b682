package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// An API server admits at most two jobs at once; whichever worker finishes
// a job gives its permit back by id, without the handle that admitted it.
func ExampleSemaphore_AcquirePermit() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()

	api := semaphore.New(b, "jobs", 2)
	p, err := api.AcquirePermit(ctx) // blocks while 2 jobs run
	if err != nil {
		log.Fatal(err)
	}
	job := p.ID // sent with the job to a worker, in another process

	worker := semaphore.New(b, "jobs", 2) // the worker's own handle
	fmt.Println(worker.ReleasePermit(ctx, job))
	err = worker.ReleasePermit(ctx, job) // released already
	fmt.Println(errors.Is(err, dsync.ErrNotHeld))
	// Output:
	// <nil>
	// true
}
