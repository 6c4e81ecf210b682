package fault

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/mutex"
)

// Lost-signal latency: a hold whose key is deleted behind its holder's
// back (a flush, an operator, a failover that lost the write) is reported
// by Done at the watchdog's next renewal, so within a third of the lease.
// 120 holds on one backend, with a 600ms watchdog lease (renewed every
// 200ms, in batches), have their keys deleted one after another at 7ms
// intervals, so that the deletions fall at every phase of the renewal
// cycle; the latency from each DEL to the close of its Done is measured.
// The bound allows 50ms, and twice the longest stall of an exchange with
// the server timed meanwhile (see tripmeter): a renewal that the machine
// holds up is late by that much, and only that is forgiven.
func TestLostSignalLatency(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	const (
		n     = 120
		lease = 600 * time.Millisecond
	)
	ctx := dsync.WithOwner(context.Background())
	ms := make([]*mutex.Mutex, n)
	for i := range ms {
		ms[i] = mutex.New(b, fmt.Sprintf("lost:%d", i), mutex.WithWatchdog(lease), mutex.WithLogger(nil))
		if err := ms[i].LockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lat := make([]time.Duration, n)
	trips := tripmeter.Start(t, ctx, newBackend(t, srv.Addr()))
	var wg sync.WaitGroup
	for i, m := range ms {
		if _, err := do(ctx, srv.Addr(), "DEL", fmt.Sprintf("dsync:mutex:{lost:%d}", i)); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-m.Done(ctx):
				lat[i] = time.Since(deleted)
			case <-time.After(2 * lease):
				lat[i] = -1
			}
		}()
		time.Sleep(7 * time.Millisecond)
	}
	wg.Wait()
	stall := trips.Stop()
	for i, d := range lat {
		if d < 0 {
			t.Fatalf("hold %d: Done still open %v after its key was deleted", i, 2*lease)
		}
	}
	p50, p99, max := percentiles(lat)
	t.Logf("lost signal after DEL, %d trials, %v watchdog lease: p50 %v, p99 %v, max %v (bound: a third of the lease, %v; longest stall %v)",
		n, lease, p50.Round(time.Millisecond), p99.Round(time.Millisecond), max.Round(time.Millisecond), lease/3, stall)
	if bound := lease/3 + 50*time.Millisecond + 2*stall; max > bound {
		t.Errorf("Done closed up to %v after the DEL; want within a third of the lease plus 50ms and twice the longest stall, %v (%v)", max, stall, bound)
	}
}
