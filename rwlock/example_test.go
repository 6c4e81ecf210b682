package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// Many readers share the lock; a writer has it alone.
func Example() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()

	config := rwlock.New(b, "config")
	other := rwlock.New(b, "config") // as another process would
	config.RLock()
	other.RLock()
	st, _ := config.State(ctx)
	fmt.Println(st.Mode, st.Readers)
	config.RUnlock()
	other.RUnlock()

	config.Lock()
	ok, _ := other.TryRLockContext(ctx)
	fmt.Println("read during a write:", ok)
	config.Unlock()
	// Output:
	// read 2
	// read during a write: false
}

// An owner that holds the write lock may read too, and keeps reading after
// it releases the write hold; a reader asking for write is refused at once.
func ExampleRWMutex_RLockContext() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := dsync.WithOwner(context.Background())
	cache := rwlock.New(b, "cache")

	if err := cache.LockContext(ctx); err != nil {
		log.Fatal(err)
	}
	// ... rebuild the cache ...
	cache.RLockContext(ctx) // downgrade: read what was written
	cache.UnlockContext(ctx)
	st, _ := cache.State(ctx)
	fmt.Println(st.Mode, st.ReadCount)

	err := cache.LockContext(ctx)
	fmt.Println(errors.Is(err, dsync.ErrUpgrade))
	cache.RUnlockContext(ctx)
	// Output:
	// read 1
	// true
}

// RLocker gives the read side as a sync.Locker.
func ExampleRWMutex_RLocker() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	m := rwlock.New(b, "catalog")
	r := m.RLocker()
	r.Lock()
	st, _ := m.State(context.Background())
	fmt.Println(st.Mode)
	r.Unlock()
	// Output: read
}
