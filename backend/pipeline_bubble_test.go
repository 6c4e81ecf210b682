package backend_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// TestPipelineInSuccessiveBubbles: a program tested with testing/synctest
// makes a backend in each bubble. What one bubble's Pipeline keeps for
// reuse (a caller's channel, its timer) must never reach another bubble's:
// the runtime kills the whole test binary ("select on synctest channel
// from outside bubble") when a goroutine waits on a channel made in
// another bubble.
func TestPipelineInSuccessiveBubbles(t *testing.T) {
	for round := range 3 {
		synctest.Test(t, func(t *testing.T) {
			c := newEchoClient(false)
			c.latency = time.Millisecond
			p := c.pipeline(t, backend.PipelineConfig{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 10 {
						// Cancellable, with a deadline: such calls queue,
						// and their callers wait with a timer too.
						ctx, cancel := context.WithTimeout(context.Background(), time.Second)
						token := fmt.Sprintf("r%d-g%d-%d", round, g, i)
						reply, err := p.Do(ctx, call(token, false))
						cancel()
						if err := check(token, false, reply, err); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
