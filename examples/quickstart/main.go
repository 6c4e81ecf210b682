// Command quickstart is the README's quick start: two locks on a Redis at
// $REDIS_ADDR (default localhost:6379).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/mutex"
)

func main() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "localhost:6379"
	}
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
	defer pool.Close()
	b := redigo.New(pool)
	defer b.Close()

	// A sync.Locker shared by every process that uses the name.
	var mu sync.Locker = mutex.New(b, "orders:42")
	mu.Lock()
	fmt.Println("updating order 42")
	mu.Unlock()

	// Reentrant per owner, bounded by ctx, fenced, and told of a loss.
	ctx := dsync.WithOwner(context.Background())
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ledger := mutex.New(b, "ledger")
	if err := ledger.LockContext(ctx); err != nil {
		log.Fatal(err) // waited 5s, or the server failed
	}
	defer ledger.UnlockContext(ctx) // releases even after ctx ends
	token, _ := ledger.Token(ctx)   // pass with every write; reject lower ones
	select {
	case <-ledger.Done(ctx):
		log.Fatal("lost the lock: stop writing")
	default:
		fmt.Println("writing the ledger with fencing token", token)
	}

	// One leader among the processes that campaign, the others queued in
	// turn; e.Observe(ctx) tells anyone of every change of leader.
	e := election.New(b, "reports")
	term, err := e.Campaign(ctx, "host-a:8080")
	if err != nil {
		log.Fatal(err) // waited 5s for the others' turns
	}
	defer term.Resign(ctx) // hands leadership to the next at once
	fmt.Println("leading with fencing token", term.Token())
}
