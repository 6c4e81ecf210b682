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

	// The hold as a context, cancelled if the lock is lost; 5s wait at most.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ledger := mutex.New(b, "ledger")
	lctx, unlock, err := ledger.LockScope(ctx)
	if err != nil {
		log.Fatal(err) // waited 5s, or the server failed
	}
	defer unlock()
	token, _ := ledger.Token(lctx) // pass with every write; reject lower ones
	fmt.Println("writing the ledger with fencing token", token)

	// One leader among the processes that campaign, the others queued in
	// turn; e.Run leads again and again, e.Observe tells of every change.
	e := election.New(b, "reports")
	term, err := e.Campaign(ctx, "host-a:8080")
	if err != nil {
		log.Fatal(err) // waited 5s for the others' turns
	}
	defer term.Resign(ctx) // hands leadership to the next at once
	tok, _ := term.Token(ctx)
	fmt.Println("leading with fencing token", tok)
}
