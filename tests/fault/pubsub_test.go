package fault

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/mutex"
)

// waitersAcquireAfter queues n waiters for name on b, then releases the
// holder's hold right after fault has cut the waiters' pub/sub
// connection, so that the release's wake-up is published to nobody. The
// waiters must all acquire all the same, woken by the gap that their
// subscription's re-establishment reports, and well before their 5s
// heartbeat would have them try again. It returns how long the first
// waiter took after the release.
func waitersAcquireAfter(t *testing.T, addr string, b backend.Backend, name string, n int, fault func()) time.Duration {
	t.Helper()
	// The holder is another process: a release in this one would wake
	// its waiters here directly, not through pub/sub.
	holder := startChild(t, "holder", addr, name, "30s", "watchdog")
	holder.expect(t, "locked", 5*time.Second)
	probe := mutex.New(b, name)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	acquired := make(chan time.Time, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := mutex.New(b, name, mutex.WithLogger(nil))
			if err := m.LockContext(ctx); err != nil {
				t.Errorf("waiter: %v", err)
				return
			}
			acquired <- time.Now()
			m.Unlock()
		}()
	}
	awaitWaiters(t, probe, n)
	fault()
	released := time.Now()
	if r := holder.unlock(t, 5*time.Second); r != "<nil>" {
		t.Fatalf("holder's unlock: %s", r)
	}
	wg.Wait()
	close(acquired)
	first := time.Duration(-1)
	for at := range acquired {
		if d := at.Sub(released); first < 0 || d < first {
			first = d
		}
	}
	return first
}

// awaitWaiters waits until n waiters are registered on the server.
func awaitWaiters(t *testing.T, m *mutex.Mutex, n int) {
	t.Helper()
	for i := 0; ; i++ {
		s, err := m.State(context.Background())
		if err == nil && s.Waiters >= n {
			return
		}
		if i == 400 {
			t.Fatalf("%d waiters registered after 2s, want %d (%v)", s.Waiters, n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The pub/sub connection killed (CLIENT KILL TYPE pubsub) just before a
// release: the waiters still acquire, each in turn.
func TestPubSubKilled(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	first := waitersAcquireAfter(t, srv.Addr(), b, "pubsub-kill", 5, func() {
		if _, err := do(context.Background(), srv.Addr(), "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("pub/sub connection killed before the release: first of 5 waiters acquired %v after it", first.Round(time.Millisecond))
	if first > time.Second {
		t.Errorf("first waiter acquired %v after the release; want well before the heartbeat", first)
	}
}

// A slow consumer: the server's pub/sub output buffer limit is tiny and a
// flood of messages on the waiters' channel overflows it, so the server
// drops the waiters' pub/sub connection. The waiters still acquire.
func TestPubSubSlowConsumer(t *testing.T) {
	srv := startServer(t, "--client-output-buffer-limit", "pubsub 64kb 32kb 1")
	b := newBackend(t, srv.Addr())
	ctx := context.Background()
	first := waitersAcquireAfter(t, srv.Addr(), b, "pubsub-flood", 3, func() {
		chans, err := redis.Strings(do(ctx, srv.Addr(), "PUBSUB", "CHANNELS", "dsync:mutex:{pubsub-flood}*"))
		if err != nil || len(chans) == 0 {
			t.Fatalf("the waiters' channel: %v, %v", chans, err)
		}
		before := pubsubIDs(t, srv.Addr())
		c, err := redis.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Each message is larger than any socket buffer: most of it
		// waits in the server's output buffer, over the limit.
		payload := strings.Repeat("x", 16<<20)
		for i := 0; i < 2; i++ {
			c.Send("PUBLISH", chans[0], payload)
		}
		if _, err := c.Do(""); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			after := pubsubIDs(t, srv.Addr())
			if slices.ContainsFunc(before, func(id string) bool { return !slices.Contains(after, id) }) {
				return // a pub/sub connection was dropped
			}
			if i == 200 {
				t.Fatal("the server did not drop the slow pub/sub consumer")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Logf("pub/sub consumer dropped for its output buffer: first of 3 waiters acquired %v after the release", first.Round(time.Millisecond))
	if first > time.Second {
		t.Errorf("first waiter acquired %v after the release; want well before the heartbeat", first)
	}
}

// pubsubIDs returns the ids of the server's pub/sub connections.
func pubsubIDs(t *testing.T, addr string) []string {
	t.Helper()
	list, err := redis.String(do(context.Background(), addr, "CLIENT", "LIST", "TYPE", "pubsub"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(list, "\n") {
		if id, ok := strings.CutPrefix(line, "id="); ok {
			ids = append(ids, strings.Fields(id)[0])
		}
	}
	return ids
}
