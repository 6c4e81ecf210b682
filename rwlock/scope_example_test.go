package rwlock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

func ExampleRWMutex_RLockScope() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	config := rwlock.New(b, "config")

	ctx, runlock, err := config.RLockScope(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer runlock()
	// Work with ctx stops if this read hold is lost; another reader's
	// scope shares the lock.
	_, runlock2, _ := rwlock.New(b, "config").RLockScope(context.Background())
	defer runlock2()
	s, _ := config.State(ctx)
	fmt.Println(s.Mode, s.Readers)
	// Output: read 2
}
