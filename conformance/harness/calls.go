package harness

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// CallConcurrently evaluates s, with one key, calls times through b from
// goroutines goroutines, each with a context of its own from newCtx (as
// the requests of a service have), and returns what it cost the node per
// call: the server's read events (1 for a round trip of its own, less when
// calls share them) and commands, and its CPU time. A benchmark's timer
// runs during the calls only, and its allocations are reported.
func CallConcurrently(tb testing.TB, n *Node, b backend.Backend, s *backend.Script, goroutines, calls int, newCtx func() (context.Context, context.CancelFunc)) (reads, cmds float64, cpu time.Duration) {
	tb.Helper()
	keys := []string{"bench"}
	if _, err := b.Eval(context.Background(), s, keys); err != nil {
		tb.Fatal(err)
	}
	before, err := n.Stats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	bench, _ := tb.(*testing.B)
	if bench != nil {
		bench.ReportAllocs()
		bench.ResetTimer()
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
				if _, err := b.Eval(ctx, s, keys); err != nil {
					tb.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if bench != nil {
		bench.StopTimer()
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
