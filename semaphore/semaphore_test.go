package semaphore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// childEnv carries a child holder's instructions: address, prefix, name,
// capacity, permits and fixed lease, separated by spaces.
const childEnv = "DSYNC_SEMAPHORE_CHILD"

// maybeChild runs this test binary as a holder process when asked to, and
// reports whether it did: it acquires, says so on stdout, and waits until
// killed, never releasing.
func maybeChild() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	var addr, prefix, name string
	var capacity, n int64
	var leaseS string
	fmt.Sscan(spec, &addr, &prefix, &name, &capacity, &n, &leaseS)
	leaseD, _ := time.ParseDuration(leaseS)
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
	s := semaphore.New(bredigo.New(pool), name, capacity, semaphore.WithPrefix(prefix), semaphore.WithLease(leaseD))
	if err := s.Acquire(context.Background(), n); err != nil {
		fmt.Fprintln(os.Stderr, "child holder:", err)
		os.Exit(3)
	}
	fmt.Println("held")
	select {}
}

// keysUnder lists the keys under prefix p, but for a free semaphore's
// grant counter ("<grant> free", "<grant> free o"), which it keeps for the
// rest of its last holder's lease.
func keysUnder(t *testing.T, srv *testserver.Server, p string) []string {
	t.Helper()
	ctx := context.Background()
	v, err := redis.Strings(srv.Do(ctx, "KEYS", p+":*"))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, k := range v {
		s, _ := redis.String(srv.Do(ctx, "GET", k))
		pttl, _ := redis.Int64(srv.Do(ctx, "PTTL", k))
		f := strings.Fields(s)
		if len(f) >= 2 && f[1] == "free" && pttl > 0 && pttl <= (30*time.Second).Milliseconds() {
			continue
		}
		left = append(left, k)
	}
	return left
}

// A holder process killed without releasing, on a fixed lease, gets its
// permits back within the lease and 200ms: a waiter acquires them then.
func TestKilledHolderPermitsReturn(t *testing.T) {
	const leaseD = time.Second
	srv := testserver.Real(t)
	ctx := context.Background()
	p := "killed:" + dsync.NewID()[:8]
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s s 3 2 %v", childEnv, srv.Addr(), p, leaseD))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("child: %q, %v", line, err)
	}
	held := time.Now() // no earlier than the child's acquisition
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s := semaphore.New(srv.NewBackend(t), "s", 3, semaphore.WithPrefix(p))
	if ok, err := s.TryAcquire(ctx, 2); ok || err != nil {
		t.Fatalf("TryAcquire(2) right after the kill = %v, %v; want false: the dead holder's permits are still leased", ok, err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Acquire(actx, 3); err != nil {
		t.Fatal(err)
	}
	d := time.Since(held)
	t.Logf("the killed holder's permits came back %v after it acquired them (lease %v)", d, leaseD)
	if d > leaseD+200*time.Millisecond {
		t.Errorf("permits back after %v; want within the lease %v + 200ms", d, leaseD)
	}
	if err := s.Release(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if k := keysUnder(t, srv, p); len(k) != 0 {
		t.Errorf("keys left with every permit free: %v", k)
	}
}

// A live holder on a watchdog lease keeps its permits as long as it holds
// them: for 4s on a 1s lease, nobody else acquires, and its Done stays
// open.
func TestWatchdogKeepsPermits(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := "watchdog:" + dsync.NewID()[:8]
	holder := semaphore.New(srv.NewBackend(t), "s", 2, semaphore.WithPrefix(p), semaphore.WithWatchdog(time.Second))
	other := semaphore.New(srv.NewBackend(t), "s", 2, semaphore.WithPrefix(p))
	o := dsync.WithOwner(ctx)
	if err := holder.Acquire(o, 2); err != nil {
		t.Fatal(err)
	}
	done := holder.Done(o)
	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline) && i < 1000; i++ {
		if ok, err := other.TryAcquire(ctx, 1); ok || err != nil {
			t.Fatalf("another owner acquired a permit %v into the hold: %v, %v", time.Until(deadline), ok, err)
		}
		select {
		case <-done:
			t.Fatal("the holder's Done closed while its watchdog renews")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := holder.Release(o, 2); err != nil {
		t.Fatal(err)
	}
	<-done
	if ok, err := other.TryAcquire(ctx, 2); !ok || err != nil {
		t.Fatalf("TryAcquire(2) after the release = %v, %v", ok, err)
	}
	if err := other.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
}

// A waiter acquires within 50ms of the release that frees its permits.
func TestWaiterWokenPromptly(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := "prompt:" + dsync.NewID()[:8]
	holder := semaphore.New(srv.NewBackend(t), "s", 2, semaphore.WithPrefix(p))
	var worst time.Duration
	for round := range 10 {
		if err := holder.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		w := semaphore.New(srv.NewBackend(t), "s", 2, semaphore.WithPrefix(p))
		got := make(chan time.Time, 1)
		go func() {
			if err := w.Acquire(ctx, 1); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		awaitQueued(t, ctx, holder, 1)
		released := time.Now()
		if err := holder.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		var at time.Time
		select {
		case at = <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the waiter never acquired", round)
		}
		worst = max(worst, at.Sub(released))
		if err := w.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("slowest wake-up of 10: %v after the release", worst)
	if worst > 50*time.Millisecond {
		t.Errorf("a waiter acquired %v after the release; want within 50ms", worst)
	}
}

func awaitQueued(t *testing.T, ctx context.Context, s *semaphore.Semaphore, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		st, err := s.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued >= n {
			return
		}
		if time.Now().After(deadline) || i > 5000 {
			t.Fatalf("%d waiters not queued within 5s", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Bad input is reported, matching its sentinel, before any I/O: the
// backend here fails every call.
func TestBadInputWithoutIO(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	b := &countingBackend{calls: &calls}
	s := semaphore.New(b, "s", 3)
	for _, n := range []int64{0, -1, 4} {
		if err := s.Acquire(ctx, n); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("Acquire(%d) = %v; want ErrInvalidPermits", n, err)
		}
		if _, err := s.TryAcquire(ctx, n); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("TryAcquire(%d) = %v; want ErrInvalidPermits", n, err)
		}
		if err := s.Release(ctx, n); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("Release(%d) = %v; want ErrInvalidPermits", n, err)
		}
	}
	if err := s.Release(ctx, 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Release(1) unheld = %v; want ErrNotHeld", err)
	}
	if err := s.Release(dsync.WithOwner(ctx), 1); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Release(1) unheld by an owner = %v; want ErrNotHeld", err)
	}
	if err := s.SetCapacity(ctx, -1); !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("SetCapacity(-1) = %v; want ErrInvalidPermits", err)
	}
	for _, c := range []struct {
		s    *semaphore.Semaphore
		want error
	}{
		{semaphore.New(b, "s", 0), dsync.ErrInvalidPermits},
		{semaphore.New(b, "s", -3), dsync.ErrInvalidPermits},
		{semaphore.New(nil, "s", 3), dsync.ErrInvalidBackend},
		{semaphore.New(b, "", 3), dsync.ErrInvalidName},
		{semaphore.New(b, strings.Repeat("x", 2000), 3), dsync.ErrInvalidName},
		{semaphore.New(b, "s", 3, semaphore.WithLease(0)), dsync.ErrInvalidLease},
		{semaphore.New(b, "s", 3, semaphore.WithWatchdog(-time.Second)), dsync.ErrInvalidLease},
		{semaphore.New(b, "s", 3, semaphore.WithWaiterTimeout(time.Millisecond)), dsync.ErrInvalidLease},
		{semaphore.New(b, "s", 3, semaphore.WithPrefix("")), dsync.ErrInvalidName},
		{new(semaphore.Semaphore), dsync.ErrInvalidBackend},
	} {
		for what, err := range map[string]error{
			"Acquire":     c.s.Acquire(ctx, 1),
			"TryAcquire":  second(c.s.TryAcquire(ctx, 1)),
			"Release":     c.s.Release(ctx, 1),
			"State":       second(c.s.State(ctx)),
			"SetCapacity": c.s.SetCapacity(ctx, 2),
		} {
			if !errors.Is(err, c.want) {
				t.Errorf("%s on a bad handle = %v; want %v", what, err, c.want)
			}
		}
		select {
		case <-c.s.Done(ctx):
		default:
			t.Error("Done on a bad handle is not closed")
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d backend calls on bad input", n)
	}
}

func second[T any](_ T, err error) error { return err }

// Capacity 3, 10 backends with 2 goroutines each acquiring 1 or 2 permits
// for 3s: the permits held, counted in the critical section, never exceed
// 3 and reach 3.
func TestCapacityNeverExceeded(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := "cap:" + dsync.NewID()[:8]
	var (
		inside, peak atomic.Int64
		wg           sync.WaitGroup
		rounds       atomic.Int64
	)
	stop := time.Now().Add(3 * time.Second)
	for i := range 10 {
		s := semaphore.New(srv.NewBackend(t), "s", 3, semaphore.WithPrefix(p))
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := int64(1 + (i+g)%2)
				for j := 0; time.Now().Before(stop) && j < 100000; j++ {
					if err := s.Acquire(ctx, n); err != nil {
						t.Error(err)
						return
					}
					now := inside.Add(n)
					if now > 3 {
						t.Errorf("%d permits held at once", now)
					}
					for {
						old := peak.Load()
						if now <= old || peak.CompareAndSwap(old, now) {
							break
						}
					}
					time.Sleep(time.Millisecond)
					inside.Add(-n)
					if err := s.Release(ctx, n); err != nil {
						t.Error(err)
						return
					}
					rounds.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d acquisitions, peak %d permits held", rounds.Load(), peak.Load())
	if peak.Load() != 3 {
		t.Errorf("peak %d permits held; want 3", peak.Load())
	}
	if k := keysUnder(t, srv, p); len(k) != 0 {
		t.Errorf("keys left with every permit free: %v", k)
	}
}
