package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestSetNXPublishOneRoundTrip: the SET and the PUBLISH of SetNXPublish
// reach the server in one read (see harness.SetNXPublishOneRoundTrip).
func TestSetNXPublishOneRoundTrip(t *testing.T) {
	srv := harness.Standalone(t)
	harness.SetNXPublishOneRoundTrip(t, srv.Node(), func(pipelining bool) (backend.Backend, func()) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		b := goredis.New(c, goredis.WithPipelining(pipelining))
		return b, func() { b.Close(); c.Close() }
	})
}
