package rueidis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestConcurrentCallsShareRoundTrips: calls made at once through one
// backend, each with a context that can be cancelled (a request's), share
// the server's reads, as the Pipeline batches them. rueidis's own
// auto-pipelining, which the adapter used before, gave about 0.4 reads per
// call here; the Pipeline about 0.03.
func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	srv := harness.Standalone(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := dsyncrueidis.New(c)
	defer b.Close()
	const goroutines, calls = 64, 64 * 50
	reads, cmds, _ := harness.CallConcurrently(t, srv.Node(), b, one, goroutines, calls, func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Minute)
	})
	if cmds < 1 {
		t.Fatalf("%.2f commands per call: the calls did not all reach the server", cmds)
	}
	if reads > 0.2 {
		t.Errorf("%.3f server reads per call from %d goroutines, want at most 0.2: the calls do not share round trips", reads, goroutines)
	}
	t.Logf("%.3f server reads per call", reads)
}
