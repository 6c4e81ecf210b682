package election_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

func ExampleElection_Run() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	e := election.New(b, "compactor")
	ctx, shutdown := context.WithCancel(context.Background())

	// Every process of the service runs the same loop; one leads at a
	// time, and another takes over when it stops or dies.
	err := e.Run(ctx, "host-a", func(ctx context.Context, t *election.Term) error {
		fmt.Println("leading")
		shutdown() // here, the service shutting down
		<-ctx.Done()
		return ctx.Err()
	})
	fmt.Println("stopped:", errors.Is(err, context.Canceled))
	// Output:
	// leading
	// stopped: true
}
