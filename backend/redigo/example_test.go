package redigo_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

func ExampleNew() {
	srv, err := testserver.StartRedis() // a private redis-server for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	// The pool your service already has: scripts run on its connections;
	// pub/sub gets one connection of its own, dialed with pool.Dial.
	pool := &redis.Pool{
		MaxIdle:     16,
		IdleTimeout: time.Minute,
		Dial: func() (redis.Conn, error) {
			return redis.Dial("tcp", srv.Addr(), redis.DialConnectTimeout(time.Second))
		},
	}
	defer pool.Close() // after the backend: Close leaves the pool to you
	b := redigo.New(pool, redigo.WithTimeout(5*time.Second))
	defer b.Close()

	ok, err := mutex.New(b, "reports").TryLockContext(context.Background())
	fmt.Println(ok, err)
	// Output: true <nil>
}
