package rueidis_test

import (
	"context"
	"fmt"
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
					reads, cmds, cpu := harness.CallConcurrently(b, srv.Node(), be, one, goroutines, b.N, newCtx)
					b.ReportMetric(reads, "reads/op")
					b.ReportMetric(cmds, "cmds/op")
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "srv-ns/op")
				})
			}
		}
	}
}
