package redigo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

var oneScript = backend.NewScript(`-- KEYS: one, unused. Reply: 1.
return 1`)

// BenchmarkPipelining evaluates a tiny script through one backend from 1
// and from 64 goroutines, with pipelining on and off, and with a context
// as dsync's primitives pass it (a deadline, no Done) or one that can be
// cancelled. reads/op is the server's read events per call: 1 for a round
// trip of its own, less when calls share them; srv-ns/op is the server's
// CPU time per call.
func BenchmarkPipelining(b *testing.B) {
	srv := harness.Standalone(b)
	for _, goroutines := range []int{1, 4, 16, 64} {
		for _, ctxKind := range []string{"deadline", "cancellable"} {
			for _, on := range []bool{true, false} {
				name := fmt.Sprintf("G=%d/ctx=%s/pipelining=%v", goroutines, ctxKind, on)
				b.Run(name, func(b *testing.B) {
					pool := &redis.Pool{MaxIdle: 64, IdleTimeout: time.Minute, DialContext: func(ctx context.Context) (redis.Conn, error) {
						return redis.DialContext(ctx, "tcp", srv.Addr())
					}}
					defer pool.Close()
					be := bredigo.New(pool, bredigo.WithPipelining(on))
					defer be.Close()
					// A context of each goroutine's own, as each request
					// of a service has.
					newCtx := func() (context.Context, context.CancelFunc) {
						if ctxKind == "deadline" {
							return backend.DeadlineContext(context.Background(), time.Now().Add(time.Hour)), func() {}
						}
						return context.WithTimeout(context.Background(), time.Hour)
					}
					reads, cmds, cpu := harness.CallConcurrently(b, srv.Node(), be, oneScript, goroutines, b.N, newCtx)
					b.ReportMetric(reads, "reads/op")
					b.ReportMetric(cmds, "cmds/op")
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "srv-ns/op")
				})
			}
		}
	}
}
