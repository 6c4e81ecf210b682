package election_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

func ExampleElection_CampaignScope() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	e := election.New(b, "compactor", election.WithLogger(nil))

	ctx, resign, err := e.CampaignScope(context.Background(), "host-a")
	if err != nil {
		log.Fatal(err)
	}
	defer resign()
	tok, err := election.TermOf(ctx).Token(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading, fenced by token:", tok > 0)

	// An operator ends the term (as from another process): the work done
	// with ctx stops.
	election.New(b, "compactor").ForceResign(context.Background())
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))
	// Output:
	// leading, fenced by token: true
	// election "compactor": the term was lost (taken by ForceUnlock): dsync: not held by this owner
}
