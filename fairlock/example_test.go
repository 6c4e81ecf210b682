package fairlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// Waiters are served in the order they reached the server, whatever their
// process or how long each waits.
func Example() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()
	lock := fairlock.New(b, "reports")
	lock.Lock()

	served := make(chan string, 3)
	for i, who := range []string{"first", "second", "third"} {
		w := fairlock.New(b, "reports") // as another process would
		go func() {
			w.Lock()
			served <- who
			w.Unlock()
		}()
		for queued(ctx, lock) < i+1 { // queued before the next one starts
			time.Sleep(time.Millisecond)
		}
	}
	lock.Unlock()
	fmt.Println(<-served, <-served, <-served)
	// Output: first second third
}

func queued(ctx context.Context, l *fairlock.Mutex) int {
	st, _ := l.State(ctx)
	return st.Queued
}

// State tells a waiter, through its owner, where it stands in the queue.
func ExampleMutex_State() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx := context.Background()
	holder := fairlock.New(b, "deploy")
	holder.Lock()

	owner := dsync.WithOwner(ctx)
	waiter := fairlock.New(b, "deploy")
	got := make(chan error, 1)
	go func() { got <- waiter.LockContext(owner) }()
	for queued(ctx, holder) == 0 {
		time.Sleep(time.Millisecond)
	}
	st, _ := waiter.State(owner)
	fmt.Println(st.Locked, st.Queued, st.Position)

	holder.Unlock()
	fmt.Println(<-got)
	waiter.UnlockContext(owner)
	// Output:
	// true 1 1
	// <nil>
}
