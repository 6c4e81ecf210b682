package multilock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

func ExampleLock_LockScope() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	l := multilock.All(mutex.New(b, "account:1"), mutex.New(b, "account:2", mutex.WithLogger(nil)))

	ctx, unlock, err := l.LockScope(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer unlock()
	// An operator takes one account (as from another process): the work
	// done with ctx stops, as the group is lost.
	mutex.New(b, "account:2").ForceUnlock(context.Background())
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))
	// Output:
	// multilock: the group was lost (lost: member 1, *mutex.Mutex "account:2"): dsync: not held by this owner
}
