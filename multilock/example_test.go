package multilock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// A transfer locks both accounts, whichever order the caller names them
// in: no deadlock with a transfer the other way.
func ExampleAll() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()

	transfer := func(ctx context.Context, from, to string) error {
		l := multilock.All(mutex.New(b, "account:"+from), mutex.New(b, "account:"+to))
		ctx = dsync.WithOwner(ctx)
		if err := l.LockContext(ctx); err != nil {
			return err
		}
		defer l.UnlockContext(ctx)
		fmt.Println("moving money from", from, "to", to)
		return nil
	}
	ctx := context.Background()
	if err := transfer(ctx, "1", "2"); err != nil {
		log.Fatal(err)
	}
	if err := transfer(ctx, "2", "1"); err != nil {
		log.Fatal(err)
	}
	// Output:
	// moving money from 1 to 2
	// moving money from 2 to 1
}

// RedLock over three independent servers, with fencing tokens per
// member: a resource that keeps the highest token it has seen from each
// member turns away a holder whose lease ran out.
func ExampleRedLock() {
	var members []dsync.Locker
	for range 3 {
		b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
		defer stop()
		members = append(members, mutex.New(b, "report:daily"))
	}
	l := multilock.RedLock(members...)
	ctx := dsync.WithOwner(context.Background())
	if err := l.LockContext(ctx); err != nil {
		log.Fatal(err)
	}
	tokens, err := l.Tokens(ctx)
	if err != nil {
		log.Fatal(err)
	}
	held := 0
	for _, t := range tokens {
		if t > 0 {
			held++
		}
	}
	fmt.Println("members held:", held)
	if err := l.UnlockContext(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: members held: 3
}
