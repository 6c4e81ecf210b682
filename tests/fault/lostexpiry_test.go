package fault

import (
	"context"
	"fmt"
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
// (PEXPIRETIME, ms) is read after the acquisition, and the time Done is
// seen closed by a goroutine waiting on it is compared with it (same
// machine, same clock). Criterion: every Done closes before its key's
// expiry on the server.
func TestLostSignalExpiry(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	const (
		n     = 100
		lease = time.Second
	)
	ctx := dsync.WithOwner(context.Background())
	early := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		m := mutex.New(b, fmt.Sprintf("expiry:%d", i), mutex.WithLease(lease), mutex.WithLogger(nil))
		if err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("dsync:mutex:{expiry:%d}", i)
		at, err := redis.Int64(do(ctx, srv.Addr(), "PEXPIRETIME", key))
		if err != nil && strings.Contains(err.Error(), "unknown command") {
			t.Skipf("PEXPIRETIME needs Redis 7: %v", err)
		}
		if err != nil || at <= 0 {
			t.Fatalf("PEXPIRETIME %s: %d, %v", key, at, err)
		}
		expiry := time.UnixMilli(at)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-m.Done(ctx):
			case <-time.After(2 * lease):
				t.Errorf("hold %d: Done still open %v after it was taken with a %v lease", i, 2*lease, lease)
				return
			}
			early[i] = time.Until(expiry)
		}()
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	late := 0
	for _, d := range early {
		if d <= 0 {
			late++
		}
	}
	p50, _, max := percentiles(early)
	min := early[0]
	for _, d := range early {
		if d < min {
			min = d
		}
	}
	t.Logf("lost signal by expiry, %d trials, %v fixed lease: Done closed before the server's expiry by p50 %v, min %v, max %v (server expiry at ms resolution); Done after the expiry: %d",
		n, lease, p50.Round(100*time.Microsecond), min.Round(100*time.Microsecond), max.Round(100*time.Microsecond), late)
	if late > 0 {
		t.Errorf("%d of %d holds: Done closed after the key expired on the server; want Done before the expiry", late, n)
	}
}
