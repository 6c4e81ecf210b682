package fairlock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
)

func ExampleMutex_LockScope() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	m := fairlock.New(b, "ledger")

	ctx, unlock, err := m.LockScope(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	post := func(ctx context.Context) error { return ctx.Err() } // work that takes a ctx
	fmt.Println("posted:", post(ctx) == nil)
	unlock()
	fmt.Println("after unlock:", context.Cause(ctx))
	// Output:
	// posted: true
	// after unlock: context canceled
}
