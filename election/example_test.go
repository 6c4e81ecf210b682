package election_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// Candidates lead in turn, and observers see every change.
func Example() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()

	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	leaders := election.New(b, "reports").Observe(octx)

	a, err := election.New(b, "reports").Campaign(ctx, "host-a:8080")
	if err != nil {
		panic(err)
	}
	fmt.Println("leader:", (<-leaders).Value)

	// Another process campaigns, and waits its turn.
	next := make(chan *election.Term)
	go func() {
		t, err := election.New(b, "reports").Campaign(ctx, "host-b:8080")
		if err != nil {
			panic(err)
		}
		next <- t
	}()
	for queued(ctx, election.New(b, "reports")) == 0 {
		time.Sleep(time.Millisecond)
	}
	a.Proclaim(ctx, "host-a:9090")
	fmt.Println("leader:", (<-leaders).Value)

	a.Resign(ctx) // hands over at once
	t := <-next
	tokA, _ := a.Token(ctx)
	tokB, _ := t.Token(ctx)
	fmt.Println("leader:", (<-leaders).Value, "with a greater token:", tokB > tokA)

	t.Resign(ctx) // nobody queued: the election lapses
	fmt.Println("no leader:", (<-leaders).IsZero())
	// Output:
	// leader: host-a:8080
	// leader: host-a:9090
	// leader: host-b:8080 with a greater token: true
	// no leader: true
}

func queued(ctx context.Context, e *election.Election) int {
	st, _ := e.State(ctx)
	return st.Queued
}
