package redigo_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// TestIdlePubSubDoesNotRedial: defect 6, once the last channel is unsubscribed the health-check PING gets +PONG, which the reader takes for an error, so the adapter redials every health-check interval while idle.
func TestIdlePubSubDoesNotRedial(t *testing.T) {
	if !testserver.RedisAvailable() {
		if testserver.RequireRedis() {
			t.Fatal("redis-server is not on PATH and DSYNC_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH; set DSYNC_REQUIRE_REDIS=1 to fail instead")
	}
	// A server of its own, so that only this test's connections count.
	srv, err := testserver.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Our own connection, opened once, for INFO and PUBLISH.
	conn, err := redis.DialContext(ctx, "tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	received := func() int64 {
		t.Helper()
		info, err := redis.String(conn.Do("INFO", "stats"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("no total_connections_received in INFO stats:\n%s", info)
		return 0
	}
	subscribers := func(channel string) int64 {
		t.Helper()
		v, err := redis.Values(conn.Do("PUBSUB", "NUMSUB", channel))
		if err != nil || len(v) != 2 {
			t.Fatalf("PUBSUB NUMSUB %s: %v, %v", channel, v, err)
		}
		n, _ := redis.Int64(v[1], nil)
		return n
	}

	const healthCheck = 100 * time.Millisecond
	b := srv.NewBackend(t, bredigo.WithHealthCheck(healthCheck))
	sub, err := b.Subscribe(ctx, "idle-first")
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	// The UNSUBSCRIBE reaches the server: the connection is idle now.
	for subscribers("idle-first") != 0 {
		if ctx.Err() != nil {
			t.Fatal("the subscription was never dropped on the server")
		}
		time.Sleep(10 * time.Millisecond)
	}

	before := received()
	time.Sleep(15 * healthCheck) // time itself is under test: 15 health checks while idle
	after := received()
	if n := after - before; n > 1 {
		t.Errorf("the server accepted %d connections in %v while the adapter had no subscription (health check %v): it redials at every PING", n, 15*healthCheck, healthCheck)
	}

	// A later Subscribe still works.
	sub, err = b.Subscribe(ctx, "idle-second")
	if err != nil {
		t.Fatalf("Subscribe after the idle period: %v", err)
	}
	defer sub.Close()
	if n, err := redis.Int(conn.Do("PUBLISH", "idle-second", "hello")); err != nil || n < 1 {
		t.Fatalf("PUBLISH right after Subscribe reached %d receivers, %v; want 1", n, err)
	}
	for {
		m, err := sub.Receive(ctx)
		if err != nil {
			t.Fatalf("Receive after the idle period: %v", err)
		}
		if m.Gap {
			continue
		}
		if m.Payload != "hello" {
			t.Errorf("received %q, want hello", m.Payload)
		}
		break
	}
}
