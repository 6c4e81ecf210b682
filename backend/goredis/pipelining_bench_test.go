package goredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

var oneScript = backend.NewScript(`-- KEYS: one, unused. Reply: 1.
return 1`)

// BenchmarkPipelining evaluates a tiny script through one backend from
// several goroutines, with pipelining on and off, with a context as
// dsync's primitives pass it (a deadline, no Done) or one that can be
// cancelled, on a client made with ContextTimeoutEnabled. reads/op is the
// server's read events per call: 1 for a round trip of its own, less when
// calls share them; srv-ns/op is the server's CPU time per call.
func BenchmarkPipelining(b *testing.B) {
	srv := harness.Standalone(b)
	for _, goroutines := range []int{1, 16, 64} {
		for _, ctxKind := range []string{"deadline", "cancellable"} {
			for _, on := range []bool{true, false} {
				name := fmt.Sprintf("G=%d/ctx=%s/pipelining=%v", goroutines, ctxKind, on)
				b.Run(name, func(b *testing.B) {
					c := goredislib.NewClient(&goredislib.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, PoolSize: 128})
					defer c.Close()
					be := goredis.New(c, goredis.WithPipelining(on))
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
