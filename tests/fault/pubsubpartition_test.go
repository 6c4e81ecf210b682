package fault

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/mutex"
)

// splitBackend returns a redigo backend whose script calls go straight to
// addr and whose pub/sub connection goes to psAddr (a proxy, then the
// server), so that a
// fault can cut the pub/sub connection alone. The adapter dials both with
// the pool's DialContext; a dial made from its pub/sub machinery is told
// apart by its call stack. The returned counter is the number of pub/sub
// dials, which the test checks so that a renamed adapter function cannot
// make it pass without the fault.
func splitBackend(t testing.TB, addr string, psAddr *atomic.Value, opts ...bredigo.Option) (backend.Backend, *atomic.Int64) {
	var psDials atomic.Int64
	pool := &redis.Pool{
		MaxIdle:     16,
		IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			to := addr
			if fromPubSub() {
				psDials.Add(1)
				to = psAddr.Load().(string)
			}
			return redis.DialContext(ctx, "tcp", to, redis.DialConnectTimeout(time.Second))
		},
	}
	b := bredigo.New(pool, opts...)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b, &psDials
}

// fromPubSub reports whether the caller's stack is the redigo adapter's
// pub/sub connection being dialled.
func fromPubSub() bool {
	pc := make([]uintptr, 32)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "backend/redigo.dialer.DialPubSub") {
			return true
		}
		if !more {
			return false
		}
	}
}

// A partition of the pub/sub connection alone (script calls still go
// through): the holder keeps its hold through the partition, longer than
// its lease, and a waiter whose wake-up message is lost still acquires
// after the release, by its heartbeat (5s) at the latest. Once the
// partition heals, a release wakes the next waiter through pub/sub again,
// within a second.
func TestPubSubPartition(t *testing.T) {
	srv := startServer(t)
	px := newProxy(t, srv.Addr())
	const lease = time.Second
	// The holder is another process, as in waitersAcquireAfter: its
	// release must reach the waiter through the server.
	holder := startChild(t, "holder", srv.Addr(), "ps-partition", lease.String(), "watchdog")
	holder.expect(t, "locked", 5*time.Second)

	var psTarget atomic.Value
	psTarget.Store(px.Addr())
	b, psDials := splitBackend(t, srv.Addr(), &psTarget, bredigo.WithHealthCheck(200*time.Millisecond))
	waiter := mutex.New(b, "ps-partition", mutex.WithWatchdog(lease), mutex.WithLogger(nil))
	probe := mutex.New(newBackend(t, srv.Addr()), "ps-partition")
	wctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 15*time.Second)
	defer cancel()
	acquired := make(chan error, 1)
	go func() { acquired <- waiter.LockContext(wctx) }()
	awaitWaiters(t, probe, 1)
	if psDials.Load() == 0 {
		t.Fatal("no pub/sub connection went through the proxy: the test would prove nothing")
	}

	px.Partition(t)
	// The partition outlasts the holder's lease: its renewals, not on
	// pub/sub, keep it.
	hold := time.NewTimer(2 * lease)
	select {
	case <-hold.C:
	case <-acquired:
		t.Fatal("the waiter acquired while the holder still held")
	}
	if r := holder.unlock(t, 5*time.Second); r != "<nil>" {
		t.Fatalf("holder's unlock during the pub/sub partition: %s (the holder lost its hold?)", r)
	}
	released := time.Now()
	var during time.Duration
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
		during = time.Since(released)
	case <-time.After(7 * time.Second):
		t.Fatal("the waiter has not acquired 7s after a release during a pub/sub partition; want within its 5s heartbeat")
	}
	healDials := psDials.Load()
	// Heal: the connections the partition held are closed and the pub/sub
	// connection is dialled straight to the server from now on. (Removing
	// a toxic from live links can leave a toxiproxy goroutine blocked for
	// good, which goleak reports.)
	psTarget.Store(srv.Addr())
	px.p.Stop()

	// After the heal: a release by another process reaches the next
	// waiter here through the re-established pub/sub connection.
	holder2 := startChild(t, "holder", srv.Addr(), "ps-partition", lease.String(), "watchdog")
	if err := waiter.UnlockContext(wctx); err != nil {
		t.Fatalf("waiter's unlock: %v", err)
	}
	holder2.expect(t, "locked", 5*time.Second)
	acquired2 := make(chan time.Time, 1)
	go func() {
		m := mutex.New(b, "ps-partition", mutex.WithLogger(nil))
		ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 10*time.Second)
		defer cancel()
		if err := m.LockContext(ctx); err != nil {
			t.Errorf("waiter after the heal: %v", err)
			close(acquired2)
			return
		}
		acquired2 <- time.Now()
		m.UnlockContext(ctx)
	}()
	awaitWaiters(t, probe, 1)
	resub := time.Now().Add(5 * time.Second)
	for psDials.Load() == healDials && time.Now().Before(resub) {
		time.Sleep(20 * time.Millisecond)
	}
	if psDials.Load() == healDials {
		t.Fatal("the pub/sub connection was not dialled again within 5s of the heal")
	}
	waitSubscribed(t, srv.Addr(), 5*time.Second)
	released = time.Now() // the child's "unlocked" may come after the wake-up
	if r := holder2.unlock(t, 5*time.Second); r != "<nil>" {
		t.Fatalf("second holder's unlock: %s", r)
	}
	at, ok := <-acquired2
	if !ok {
		return
	}
	after := at.Sub(released)
	t.Logf("pub/sub partitioned %v (holder kept its 1s lease); release during it: waiter acquired after %v (heartbeat 5s); after the heal: %v; pub/sub dials %d",
		2*lease, during.Round(time.Millisecond), after.Round(10*time.Microsecond), psDials.Load())
	if after > time.Second {
		t.Errorf("after the heal the next waiter acquired %v after the release; want within 1s (pub/sub wake-up)", after)
	}
}

// waitSubscribed waits, at most d, until the server has a pub/sub client
// with at least one channel subscribed.
func waitSubscribed(t *testing.T, addr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		reply, err := redis.String(do(context.Background(), addr, "CLIENT", "LIST", "TYPE", "pubsub"))
		if err == nil {
			for _, line := range strings.Split(reply, "\n") {
				if strings.Contains(line, " sub=") && !strings.Contains(line, " sub=0 ") {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no subscribed pub/sub client on the server %v after the heal: %q %v", d, reply, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
