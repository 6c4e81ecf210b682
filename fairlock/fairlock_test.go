package fairlock_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// childEnv carries a child waiter's instructions: address, prefix, name and
// waiter timeout, separated by spaces.
const childEnv = "DSYNC_FAIRLOCK_CHILD"

// maybeChild runs this test binary as a waiter process when asked to, and
// reports whether it did: it queues for the lock and waits, until killed.
func maybeChild() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	f := strings.Fields(spec)
	timeout, _ := time.ParseDuration(f[3])
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", f[0]) }}
	m := fairlock.New(bredigo.New(pool), f[2], fairlock.WithPrefix(f[1]), fairlock.WithWaiterTimeout(timeout))
	err := m.LockContext(context.Background())
	fmt.Fprintln(os.Stderr, "child waiter: LockContext returned", err)
	os.Exit(3)
	return true
}

func queuedCount(t *testing.T, ctx context.Context, m *fairlock.Mutex) int {
	t.Helper()
	st, err := m.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.Queued
}

func awaitQueued(t *testing.T, ctx context.Context, m *fairlock.Mutex, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; queuedCount(t, ctx, m) < n; i++ {
		if time.Now().After(deadline) || i > 10000 {
			t.Fatalf("%d waiters not queued within 10s", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A waiter whose process is killed while queued holds the queue up for at
// most the waiter timeout, plus the live waiter's reaction.
func TestKilledWaiterDelaysQueueAtMostWaiterTimeout(t *testing.T) {
	const timeout = time.Second
	srv := testserver.Real(t)
	ctx := context.Background()
	for _, release := range []string{"at once", "after the timeout"} {
		t.Run(release, func(t *testing.T) {
			p := "killed:" + dsync.NewID()[:8]
			open := func() *fairlock.Mutex {
				return fairlock.New(srv.NewBackend(t), "q", fairlock.WithPrefix(p), fairlock.WithWaiterTimeout(timeout))
			}
			holder, live := open(), open()
			holder.Lock()
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			child := exec.Command(exe, "-test.run=^$")
			child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s q %v", childEnv, srv.Addr(), p, timeout))
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			awaitQueued(t, ctx, holder, 1)
			got := make(chan time.Time, 1)
			go func() {
				if err := live.LockContext(ctx); err != nil {
					t.Error(err)
				}
				got <- time.Now()
			}()
			awaitQueued(t, ctx, holder, 2)
			child.Process.Kill()
			child.Wait()
			killed := time.Now()
			if release == "after the timeout" {
				time.Sleep(timeout + 100*time.Millisecond)
			}
			released := time.Now()
			holder.Unlock()
			var at time.Time
			select {
			case at = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("the live waiter never acquired")
			}
			delay := at.Sub(released)
			t.Logf("killed waiter at the head: the live one acquired %v after the release, %v after the kill", delay, at.Sub(killed))
			if delay > timeout+200*time.Millisecond {
				t.Errorf("the live waiter acquired %v after the release; want at most the waiter timeout %v + 200ms", delay, timeout)
			}
			live.Unlock()
		})
	}
}

// commandCalls sums the calls of every command the server ran, scripts'
// inner calls included.
func commandCalls(t *testing.T, srv *testserver.Server) int64 {
	t.Helper()
	v, err := redis.String(srv.Do(context.Background(), "INFO", "commandstats"))
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, line := range strings.Split(v, "\n") {
		// Subscriptions come and go on their own schedule (a backend's
		// first hold subscribes the lease watch): not the hand-off's.
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_subscribe:") ||
			strings.HasPrefix(line, "cmdstat_unsubscribe:") || strings.HasPrefix(line, "cmdstat_ping:") {
			continue
		}
		_, rest, _ := strings.Cut(line, ":calls=")
		n, _, _ := strings.Cut(rest, ",")
		c, _ := strconv.ParseInt(n, 10, 64)
		sum += c
	}
	return sum
}

// A release hands the lock to the head of the queue in O(1) commands,
// whatever the queue's length.
func TestCommandsPerHandOffIndependentOfQueueLength(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	per := map[int]int64{}
	// The first round loads the scripts (a NOSCRIPT reply and an EVAL
	// count as two calls): it is not counted. Each length is measured
	// twice and the fewer counted: INFO counts every client's calls, and
	// on a loaded machine a stray one (a waiter's retry, a renewal) can
	// fall in; a hand-off whose cost grows with the queue grows both times.
	for round, n := range []int{2, 2, 10, 50, 2, 10, 50} {
		p := "ops:" + dsync.NewID()[:8]
		b := srv.NewBackend(t)
		// A long waiter timeout: no heartbeat runs while counting.
		open := func(b backend.Backend) *fairlock.Mutex {
			return fairlock.New(b, "q", fairlock.WithPrefix(p), fairlock.WithWaiterTimeout(time.Minute))
		}
		holder := open(srv.NewBackend(t))
		holder.Lock()
		acquired := make(chan int, n)
		proceed := make(chan struct{})
		for i := range n {
			w := open(b)
			go func() {
				w.Lock()
				acquired <- i
				<-proceed
				w.Unlock()
			}()
			awaitQueued(t, ctx, holder, i+1)
		}
		before := commandCalls(t, srv)
		holder.Unlock()
		if first := <-acquired; first != 0 {
			t.Fatalf("%d waiters: waiter %d acquired first", n, first)
		}
		if c := commandCalls(t, srv) - before; round > 0 && (per[n] == 0 || c < per[n]) {
			per[n] = c
		}
		close(proceed)
		for range n - 1 {
			<-acquired
		}
	}
	t.Logf("server commands for one hand-off (release script and its calls, one INFO): %v", per)
	if per[2] != per[10] || per[2] != per[50] {
		t.Errorf("commands per hand-off vary with the queue's length: %v", per)
	}
}

// An uncontended Lock and Unlock cost the server what the mutex's cost:
// four commands, one plain SET NX and a release script that GETs and
// DELs the hold.
func TestUncontendedPairCommands(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	m := fairlock.New(srv.NewBackend(t), "pair", fairlock.WithPrefix("pair:"+dsync.NewID()[:8]))
	// The first pair loads the scripts: not counted.
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	const pairs = 100
	want := map[string]int64{"set": pairs, "evalsha": pairs, "get": pairs, "del": pairs}
	best, fewest, err := srv.FewestCalls(ctx, 3, func() {
		for range pairs {
			if err := m.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.UnlockContext(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d uncontended Lock+Unlock pairs: %d server commands %v", pairs, fewest, best)
	if fewest > 4*pairs || !maps.Equal(best, want) {
		t.Errorf("%d uncontended pairs cost %d server commands %v; want %d: %v", pairs, fewest, best, 4*pairs, want)
	}
}
