package redigo_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestSetNXPublishOneRoundTrip: the SET and the PUBLISH of SetNXPublish
// reach the server in one read, with whatever context, and with
// pipelining off too: one round trip, where two calls would cost two.
func TestSetNXPublishOneRoundTrip(t *testing.T) {
	srv := harness.Standalone(t)
	for _, solo := range []bool{false, true} {
		for name, newCtx := range map[string]func() (context.Context, context.CancelFunc){
			"background": func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			"a deadline without Done": func() (context.Context, context.CancelFunc) {
				return backend.DeadlineContext(context.Background(), time.Now().Add(time.Minute)), func() {}
			},
			"a cancellable context": func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			},
		} {
			pool := &redis.Pool{MaxIdle: 2, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", srv.Addr()) }}
			b := redigo.New(pool, redigo.WithPipelining(!solo))
			reads, cmds := harness.SetNXPublishCost(t, srv.Node(), b, 50, newCtx)
			b.Close()
			pool.Close()
			if reads > 1.2 || cmds < 1.9 || cmds > 2.1 {
				t.Errorf("pipelining off %v, %s: %.2f server reads and %.2f commands per SetNXPublish, want 1 read of 2 commands", solo, name, reads, cmds)
			}
		}
	}
}
