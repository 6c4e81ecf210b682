package goredis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

var oneScript = backend.NewScript(`-- KEYS: one, unused. Reply: 1.
return 1`)

// serverStats returns the node's counters (see harness.Stats).
func serverStats(b *testing.B, n *harness.Node) (reads, cmds int64, cpu time.Duration) {
	b.Helper()
	st, err := n.Stats(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return st.Reads, st.Commands, st.CPU
}

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
					keys := []string{"bench"}
					if _, err := be.Eval(context.Background(), oneScript, keys); err != nil {
						b.Fatal(err)
					}
					reads0, cmds0, cpu0 := serverStats(b, srv.Node())
					b.ReportAllocs()
					b.ResetTimer()
					var wg sync.WaitGroup
					for g := range goroutines {
						n := b.N / goroutines
						if g < b.N%goroutines {
							n++
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							ctx, cancel := newCtx()
							defer cancel()
							for range n {
								if _, err := be.Eval(ctx, oneScript, keys); err != nil {
									b.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					reads1, cmds1, cpu1 := serverStats(b, srv.Node())
					b.ReportMetric(float64(reads1-reads0-1)/float64(b.N), "reads/op")
					b.ReportMetric(float64(cmds1-cmds0-1)/float64(b.N), "cmds/op")
					b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "srv-ns/op")
				})
			}
		}
	}
}
