package otel_test

import (
	"github.com/gomodule/redigo/redis"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/observe"
	dotel "github.com/dsyncgo/dsync/otel"
)

// Every primitive on a backend reports through the global OpenTelemetry
// providers.
func ExampleNew() {
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", "localhost:6379") }}
	b := bredigo.New(pool)
	defer b.Close()
	observe.Set(b, dotel.New())

	mu := mutex.New(b, "orders:42")
	mu.Lock()
	defer mu.Unlock()
}
