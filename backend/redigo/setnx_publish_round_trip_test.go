package redigo_test

import (
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestSetNXPublishOneRoundTrip: the SET and the PUBLISH of SetNXPublish
// reach the server in one read (see harness.SetNXPublishOneRoundTrip).
func TestSetNXPublishOneRoundTrip(t *testing.T) {
	srv := harness.Standalone(t)
	harness.SetNXPublishOneRoundTrip(t, srv.Node(), func(pipelining bool) (backend.Backend, func()) {
		pool := &redis.Pool{MaxIdle: 2, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", srv.Addr()) }}
		b := redigo.New(pool, redigo.WithPipelining(pipelining))
		return b, func() { b.Close(); pool.Close() }
	})
}
