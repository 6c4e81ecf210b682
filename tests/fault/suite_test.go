package fault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/dsyncgo/dsync/backend"
	"github.com/gomodule/redigo/redis"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// The fault suite: faults injected between dsync and a real redis-server
// that the tests start, each test stating its criterion and printing what
// it measured. Faults on the network go through toxiproxy, embedded in the
// test process; faults on the server are DEBUG SLEEP, signals (SIGKILL,
// SIGSTOP) and restarts; faults on clients are child processes of the test
// binary (see child_test.go) that are killed or paused.

// startServer starts a private redis-server for t with extra arguments,
// stopped when t ends. Without redis-server it skips t, or fails it under
// DSYNC_REQUIRE_REDIS=1.
func startServer(t testing.TB, args ...string) *harness.Server {
	t.Helper()
	if !harness.Available() {
		if harness.RequireRedis() {
			t.Fatal("redis-server is not on PATH and DSYNC_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH; set DSYNC_REQUIRE_REDIS=1 to fail instead")
	}
	srv, err := harness.StartServer(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// newBackend returns a redigo backend on addr with a pool of its own,
// closed when t ends, as another process would have.
func newBackend(t testing.TB, addr string, opts ...bredigo.Option) backend.Backend {
	pool := &redis.Pool{
		MaxIdle:     16,
		IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr, redis.DialConnectTimeout(time.Second))
		},
	}
	b := bredigo.New(pool, opts...)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b
}

// do runs one command on a fresh connection to addr.
func do(ctx context.Context, addr, cmd string, args ...any) (any, error) {
	c, err := redis.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return redis.DoContext(c, ctx, cmd, args...)
}

// faultProxy is a toxiproxy proxy in front of a server: clients that
// connect to Addr reach the server through it, and the test cuts, slows
// or drops their traffic.
type faultProxy struct {
	p *toxiproxy.Proxy
}

var toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

// newProxy starts a proxy to upstream, stopped when t ends.
func newProxy(t testing.TB, upstream string) *faultProxy {
	t.Helper()
	p := toxiproxy.NewProxy(toxiServer, t.Name(), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &faultProxy{p: p}
}

// Addr is where clients connect.
func (f *faultProxy) Addr() string { return f.p.Listen }

func (f *faultProxy) add(t testing.TB, name, typ, stream string, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := f.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("toxiproxy: add %s: %v", name, err)
	}
}

func (f *faultProxy) remove(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := f.p.Toxics.RemoveToxic(context.Background(), n); err != nil {
			t.Fatalf("toxiproxy: remove %s: %v", n, err)
		}
	}
}

// Partition blackholes the traffic both ways, on the connections open
// and on new ones (which connect, and then hear nothing), until Heal.
func (f *faultProxy) Partition(t testing.TB) {
	f.add(t, "cut-up", "timeout", "upstream", `{"timeout":0}`)
	f.add(t, "cut-down", "timeout", "downstream", `{"timeout":0}`)
}

// Heal ends a partition. The connections the partition held are closed
// first: removing a timeout toxic with connections open can leave a
// toxiproxy goroutine blocked for good.
func (f *faultProxy) Heal(t testing.TB) {
	t.Helper()
	f.p.Stop()
	f.remove(t, "cut-up", "cut-down")
	if err := f.p.Start(); err != nil {
		t.Fatal(err)
	}
}

// DropReplies lets commands through and drops every reply, until
// RestoreReplies: each call's outcome is unknown to its caller.
func (f *faultProxy) DropReplies(t testing.TB) {
	f.add(t, "drop-replies", "timeout", "downstream", `{"timeout":0}`)
}

// RestoreReplies ends DropReplies.
func (f *faultProxy) RestoreReplies(t testing.TB) { f.remove(t, "drop-replies") }

// Latency delays the replies by d, until the returned function is called.
func (f *faultProxy) Latency(t testing.TB, d time.Duration) (end func()) {
	f.add(t, "latency", "latency", "downstream", fmt.Sprintf(`{"latency":%d,"jitter":0}`, d.Milliseconds()))
	return func() { f.remove(t, "latency") }
}

// Reset closes every connection through the proxy, as a network that
// resets them would, and lets new ones in.
func (f *faultProxy) Reset(t testing.TB) {
	t.Helper()
	f.p.Stop()
	if err := f.p.Start(); err != nil {
		t.Fatal(err)
	}
}

// percentiles returns the p50, p99 and max of ds.
func percentiles(ds []time.Duration) (p50, p99, max time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0, 0
	}
	return s[len(s)/2], s[(len(s)*99)/100], s[len(s)-1]
}

// heartbeat notes the time every millisecond, or as soon after as the
// process runs, until stopped.
type heartbeat struct {
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	beats []time.Time
}

func startHeartbeat() *heartbeat {
	h := &heartbeat{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for i := 0; i < 1e6; i++ {
			select {
			case <-tk.C:
				h.mu.Lock()
				h.beats = append(h.beats, time.Now())
				h.mu.Unlock()
			case <-h.quit:
				return
			}
		}
	}()
	return h
}

// stop ends the heartbeat and returns its beats, in order.
func (h *heartbeat) stop() []time.Time {
	h.once.Do(func() { close(h.quit) })
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beats
}

// gap returns the longest time between two beats in a row during [from,
// to] so far (see maxGap).
func (h *heartbeat) gap(from, to time.Time) time.Duration {
	h.mu.Lock()
	beats := h.beats
	h.mu.Unlock()
	return maxGap(beats, from, to)
}

// maxGap returns the longest time between two beats in a row during
// [from, to]: how long the process went without running there at least.
func maxGap(beats []time.Time, from, to time.Time) time.Duration {
	var gap time.Duration
	for k := 1; k < len(beats); k++ {
		if beats[k].Before(from) || beats[k-1].After(to) {
			continue
		}
		gap = max(gap, beats[k].Sub(beats[k-1]))
	}
	return gap
}
