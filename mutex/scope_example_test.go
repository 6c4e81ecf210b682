package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

func ExampleMutex_LockScope() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	m := mutex.New(b, "reports:nightly", mutex.WithLogger(nil))

	ctx, unlock, err := m.LockScope(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer unlock()
	token, _ := m.Token(ctx) // the scope's context carries the hold's owner
	fmt.Println("token issued:", token > 0)

	// An operator takes the lock (as from another process): the work
	// done with ctx stops.
	mutex.New(b, "reports:nightly").ForceUnlock(context.Background())
	<-ctx.Done()
	fmt.Println(errors.Is(context.Cause(ctx), dsync.ErrNotHeld))
	fmt.Println(context.Cause(ctx))
	// Output:
	// token issued: true
	// true
	// mutex "reports:nightly": the hold was lost (taken by ForceUnlock): dsync: not held by this owner
}
