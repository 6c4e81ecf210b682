package rueidis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// BenchmarkPipelining evaluates a tiny script through one backend from
// several goroutines, with the Pipeline on and off, with a context as
// dsync's primitives pass it (a deadline, no Done) or one that can be
// cancelled, on a client with rueidis's defaults (auto-pipelining).
// reads/op is the server's read events per call: 1 for a round trip of
// its own, less when calls share them; srv-ns/op is the server's CPU time
// per call.
func BenchmarkPipelining(b *testing.B) {
	srv := harness.Standalone(b)
	for _, goroutines := range []int{1, 16, 64} {
		for _, ctxKind := range []string{"deadline", "cancellable"} {
			for _, on := range []bool{true, false} {
				name := fmt.Sprintf("G=%d/ctx=%s/pipelining=%v", goroutines, ctxKind, on)
				b.Run(name, func(b *testing.B) {
					c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					be := dsyncrueidis.New(c, dsyncrueidis.WithPipelining(on))
					defer be.Close()
					newCtx := func() (context.Context, context.CancelFunc) {
						if ctxKind == "deadline" {
							return backend.DeadlineContext(context.Background(), time.Now().Add(time.Hour)), func() {}
						}
						return context.WithTimeout(context.Background(), time.Hour)
					}
					reads, cmds, cpu := callConcurrently(b, srv.Node(), be, goroutines, b.N, newCtx)
					b.ReportMetric(reads, "reads/op")
					b.ReportMetric(cmds, "cmds/op")
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "srv-ns/op")
				})
			}
		}
	}
}

// callConcurrently makes n calls of one through be from goroutines
// goroutines, each with a context of its own from newCtx, as the requests
// of a service have, and returns the server's read events and commands
// per call and its CPU time.
func callConcurrently(tb testing.TB, n *harness.Node, be backend.Backend, goroutines, calls int, newCtx func() (context.Context, context.CancelFunc)) (reads, cmds float64, cpu time.Duration) {
	tb.Helper()
	keys := []string{"bench"}
	if _, err := be.Eval(context.Background(), one, keys); err != nil {
		tb.Fatal(err)
	}
	before, err := n.Stats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if b, ok := tb.(*testing.B); ok {
		b.ReportAllocs()
		b.ResetTimer()
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		k := calls / goroutines
		if g < calls%goroutines {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := newCtx()
			defer cancel()
			for range k {
				if _, err := be.Eval(ctx, one, keys); err != nil {
					tb.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
	}
	after, err := n.Stats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	// The second Stats's INFO is a read and a command of its own.
	return float64(after.Reads-before.Reads-1) / float64(calls),
		float64(after.Commands-before.Commands-1) / float64(calls),
		after.CPU - before.CPU
}
