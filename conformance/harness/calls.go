package harness

import (
	"context"
	"fmt"
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

// SetNXPublishCost calls SetNXPublish through b calls times, one after the
// other, each on a key of its own and with a context from newCtx, and
// returns what it cost the node per call: the server's read events (1
// when the SET and the PUBLISH arrive together, 2 when each makes a round
// trip of its own) and commands. b must implement backend.SetPublisher;
// the node's other clients must be idle.
func SetNXPublishCost(tb testing.TB, n *Node, b backend.Backend, calls int, newCtx func() (context.Context, context.CancelFunc)) (reads, cmds float64) {
	tb.Helper()
	sp, ok := b.(backend.SetPublisher)
	if !ok {
		tb.Fatalf("%T does not implement backend.SetPublisher", b)
	}
	call := func(i int) {
		ctx, cancel := newCtx()
		defer cancel()
		if _, err := sp.SetNXPublish(ctx, fmt.Sprintf("setpublish:%d", i), "v", time.Minute, "setpublish", "hint"); err != nil {
			tb.Fatal(err)
		}
	}
	call(-1) // the connection is dialled, and its handshake read, before the count
	before, err := n.Stats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	for i := range calls {
		call(i)
	}
	after, err := n.Stats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	// The second Stats's INFO is a read and a command of its own.
	return float64(after.Reads-before.Reads-1) / float64(calls),
		float64(after.Commands-before.Commands-1) / float64(calls)
}

// SetNXPublishOneRoundTrip fails t unless SetNXPublish, through the
// backends that open makes with pipelining on and off, reaches n in one
// read of its two commands, with context.Background(), a deadline without
// Done, and a cancellable context: one round trip, where two calls would
// cost two. open returns the backend and what closes it.
func SetNXPublishOneRoundTrip(t *testing.T, n *Node, open func(pipelining bool) (backend.Backend, func())) {
	t.Helper()
	for _, pipelining := range []bool{true, false} {
		for name, newCtx := range map[string]func() (context.Context, context.CancelFunc){
			"background": func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			"a deadline without Done": func() (context.Context, context.CancelFunc) {
				return backend.DeadlineContext(context.Background(), time.Now().Add(time.Minute)), func() {}
			},
			"a cancellable context": func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			},
		} {
			b, closeB := open(pipelining)
			reads, cmds := SetNXPublishCost(t, n, b, 50, newCtx)
			closeB()
			if reads > 1.2 || cmds < 1.9 || cmds > 2.1 {
				t.Errorf("pipelining %v, %s: %.2f server reads and %.2f commands per SetNXPublish, want 1 read of 2 commands", pipelining, name, reads, cmds)
			}
		}
	}
}
