package fault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
)

// Lost signal by expiry: a hold with a fixed lease (no watchdog) is lost
// when its lease runs out on the server, and its Done must close before
// then, by the expiry margin (default 1% of the lease + 2ms: 12ms for
// 1s), so that no competitor can acquire while its holder still thinks it
// holds. 100 holds taken 5ms apart; for each, the server's expiry time
// (PEXPIRETIME, ms) is read after the acquisition.
//
// The test cannot see Done close, only a goroutine that waits on it wake
// up, and on a loaded machine that wake-up can come later than the whole
// margin: the process gets no CPU for a while, or a runnable goroutine
// waits behind others. So the criterion is on the 100 trials together:
//
//   - a heartbeat goroutine notes the time every millisecond; a trial where
//     Done is seen after the expiry and the heartbeat stopped for at least
//     half the margin between Done's due time (the expiry less the margin)
//     and its sight does not count: the process was not running;
//   - of the trials that count (at least half), at most one in ten sees
//     Done after the expiry;
//   - the median trial sees Done at least half the margin before the
//     expiry.
//
// A Done without its margin (WithExpiryMargin(0)), due at the expiry, is
// seen after it in about every other trial, and at the median about at it:
// it fails both.
func TestLostSignalExpiry(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	const (
		n     = 100
		lease = time.Second
	)
	margin := lease/100 + 2*time.Millisecond // the documented default
	ctx := dsync.WithOwner(context.Background())
	hb := startHeartbeat()
	seen := make([]time.Time, n)
	expiries := make([]time.Time, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("expiry:%d", i)
		m := mutex.New(b, name, mutex.WithLease(lease), mutex.WithLogger(nil))
		if err := m.LockContext(ctx); err != nil {
			hb.stop()
			t.Fatal(err)
		}
		key := "dsync:mutex:{" + name + "}"
		at, err := redis.Int64(do(ctx, srv.Addr(), "PEXPIRETIME", key))
		if err != nil && strings.Contains(err.Error(), "unknown command") {
			hb.stop()
			t.Skipf("PEXPIRETIME needs Redis 7: %v", err)
		}
		if err != nil || at <= 0 {
			hb.stop()
			t.Fatalf("PEXPIRETIME %s: %d, %v", key, at, err)
		}
		expiries[i] = time.UnixMilli(at)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-m.Done(ctx):
				seen[i] = time.Now()
			case <-time.After(2 * lease):
				t.Errorf("hold %d: Done still open %v after it was taken with a %v lease", i, 2*lease, lease)
			}
		}()
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	beats := hb.stop()
	if t.Failed() {
		return
	}
	var early, counted, stalls []time.Duration // early: the expiry less when Done was seen
	late := 0
	for i := range n {
		d := expiries[i].Sub(seen[i])
		early = append(early, d)
		if d <= 0 {
			if stall := maxGap(beats, expiries[i].Add(-margin), seen[i]); stall >= margin/2 {
				stalls = append(stalls, stall.Round(100*time.Microsecond))
				continue
			}
			late++
		}
		counted = append(counted, d)
	}
	p50, _, max := percentiles(early)
	t.Logf("lost signal by expiry, %d trials, %v fixed lease, margin %v: Done seen before the server's expiry by p50 %v, min %v, max %v (ms resolution); after it in %d trials of the %d that count; %d left out, the process stalled meanwhile %v",
		n, lease, margin, p50.Round(100*time.Microsecond), slices.Min(early).Round(100*time.Microsecond), max.Round(100*time.Microsecond), late, len(counted), len(stalls), stalls)
	if len(counted) < n/2 {
		t.Fatalf("only %d of %d trials count: the machine was too loaded to tell whether Done keeps its margin", len(counted), n)
	}
	if late > len(counted)/10 {
		t.Errorf("%d of %d holds: Done seen after the key expired on the server, with the process running; want at most one in ten", late, len(counted))
	}
	if p50 < margin/2 {
		t.Errorf("the median Done was seen %v before the server's expiry; want at least half the margin, %v", p50, margin/2)
	}
}
