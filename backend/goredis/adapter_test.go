package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

var one = backend.NewScript("return 1")

func TestInvalidClients(t *testing.T) {
	ctx := context.Background()
	var nilClient *redis.Client
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for name, c := range map[string]redis.UniversalClient{"nil": nil, "typed nil": nilClient, "ring": ring} {
		b := goredis.New(c)
		if _, err := b.Eval(ctx, one, nil); !errors.Is(err, dsync.ErrInvalidBackend) {
			t.Errorf("%s: Eval: %v, want ErrInvalidBackend", name, err)
		}
		if _, err := b.Subscribe(ctx, "x"); !errors.Is(err, dsync.ErrInvalidBackend) {
			t.Errorf("%s: Subscribe: %v, want ErrInvalidBackend", name, err)
		}
		b.Close()
	}
}

func TestShardedByClientType(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	if goredis.New(c).Sharded() || backend.IsSharded(goredis.New(c)) {
		t.Error("a *redis.Client reports Sharded")
	}
	if !backend.IsSharded(goredis.New(cc)) {
		t.Error("a *redis.ClusterClient does not report Sharded")
	}
}

// TestClientOwnership: Close leaves the caller's client open, and a
// client the caller closed makes calls fail with ErrClosed, which no
// retry can cure, rather than a transient error.
func TestClientOwnership(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := harness.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b := goredis.New(c)
	sub, err := b.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	b.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("the client after the backend's Close: %v", err)
	}
	b2 := goredis.New(c)
	defer b2.Close()
	c.Close()
	if _, err := b2.Eval(ctx, one, nil); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Eval through a closed client: %v, want ErrClosed", err)
	}
}

// TestDeadlineWithContextTimeout: with ContextTimeoutEnabled, a call
// whose context can never be cancelled but carries a deadline (as dsync's
// releases do) ends at the deadline, through the socket timeout, reported
// as context.DeadlineExceeded.
func TestDeadlineWithContextTimeout(t *testing.T) {
	srv := harness.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	b := goredis.New(c)
	defer b.Close()
	busy := backend.NewScript(`local t = redis.call('TIME'); local stop = t[1] * 1000000 + t[2] + 300000
while true do local n = redis.call('TIME'); if n[1] * 1000000 + n[2] > stop then break end end
return 1`)
	ctx := deadlineOnly{deadline: time.Now().Add(50 * time.Millisecond)}
	start := time.Now()
	_, err := b.Eval(ctx, busy, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Eval past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("Eval returned %v after its 50ms deadline", d)
	}
}

// TestOwnTimeoutIsTransport: with ContextTimeoutEnabled, a call whose
// context has neither Done nor a deadline (Lock with context.Background)
// is bounded by WithTimeout, and its expiry is a transport error, which
// dsync retries, not one matching context.DeadlineExceeded, which would
// end the Lock although its context never ends (backend rule 10).
func TestOwnTimeoutIsTransport(t *testing.T) {
	srv := harness.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	b := goredis.New(c, goredis.WithTimeout(50*time.Millisecond))
	defer b.Close()
	busy := backend.NewScript(`local t = redis.call('TIME'); local stop = t[1] * 1000000 + t[2] + 300000
while true do local n = redis.call('TIME'); if n[1] * 1000000 + n[2] > stop then break end end
return 1`)
	start := time.Now()
	_, err := b.Eval(context.Background(), busy, nil)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Eval past WithTimeout: %v, want a transport error not matching context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("Eval returned %v after it began, WithTimeout 50ms", d)
	}
}

// deadlineOnly is a context that can never be cancelled (Done is nil) but
// reports a deadline, as backend rule 7 allows.
type deadlineOnly struct {
	context.Context
	deadline time.Time
}

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.deadline, true }
func (d deadlineOnly) Done() <-chan struct{}       { return nil }
func (d deadlineOnly) Err() error                  { return nil }
func (d deadlineOnly) Value(any) any               { return nil }
