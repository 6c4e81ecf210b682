package semaphore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/gomodule/redigo/redis"
)

const deadWaiterEnv = "DSYNC_SEMAPHORE_DEAD_WAITER"

// TestDeadWaiterChild is the waiter process of TestDeadWaiterAtHead:
// run with deadWaiterEnv set ("addr prefix capacity n timeout"), it queues
// for n permits and waits until killed. Otherwise it does nothing.
func TestDeadWaiterChild(t *testing.T) {
	spec := os.Getenv(deadWaiterEnv)
	if spec == "" {
		t.Skip("the waiter process of TestDeadWaiterAtHead")
	}
	var addr, prefix, timeout string
	var capacity, n int64
	fmt.Sscan(spec, &addr, &prefix, &capacity, &n, &timeout)
	d, _ := time.ParseDuration(timeout)
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
	s := semaphore.New(redigo.New(pool), "s", capacity, semaphore.WithPrefix(prefix), semaphore.WithWaiterTimeout(d))
	err := s.Acquire(context.Background(), n)
	fmt.Fprintln(os.Stderr, "dead waiter child: Acquire returned:", err)
	os.Exit(3)
}

// A waiter process killed while queued at the head, its request not
// fitting, holds up the waiters behind it for no longer than its place
// lasts: the waiter timeout past its last heartbeat. The live waiter
// behind it acquires within 200ms of the dead head's expiry on the server,
// not at its own next heartbeat (a third of the timeout later, at worst).
func TestDeadWaiterAtHead(t *testing.T) {
	if os.Getenv(deadWaiterEnv) != "" {
		t.Skip("in the child")
	}
	const timeout = 1500 * time.Millisecond // heartbeats every 500ms
	srv := testserver.Real(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 3 {
		p := "deadwaiter:" + dsync.NewID()[:8]
		holder := semaphore.New(srv.NewBackend(t), "s", 2, semaphore.WithPrefix(p))
		if err := holder.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		child := exec.Command(exe, "-test.run=^TestDeadWaiterChild$")
		child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s 2 2 %v", deadWaiterEnv, srv.Addr(), p, timeout))
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		awaitState(t, ctx, holder, "the child queued", func(st semaphore.State) bool { return st.Queued == 1 })
		// Out of phase with the head's heartbeats: the live waiter's own
		// beats fall half a beat off the head's expiry.
		time.Sleep(timeout / 6)
		w := semaphore.New(srv.NewBackend(t), "s", 2, semaphore.WithPrefix(p), semaphore.WithWaiterTimeout(timeout))
		got := acquire(ctx, w, 1) // 1 is free, but the dead head comes first
		awaitState(t, ctx, holder, "the live waiter queued", func(st semaphore.State) bool { return st.Queued == 2 })
		child.Process.Kill()
		child.Wait()
		// The dead head's place ends at its expiry score, server time.
		exp := "dsync:semaphore:{s}:expiry"
		exp = p + exp[len("dsync"):]
		v, err := redis.Strings(srv.Do(ctx, "ZRANGE", exp, 0, 0, "WITHSCORES"))
		if err != nil || len(v) != 2 {
			t.Fatalf("expiry set: %v, %v", v, err)
		}
		ends, _ := strconv.ParseInt(v[1], 10, 64)
		now, err := redis.Int64s(srv.Do(ctx, "TIME"))
		if err != nil {
			t.Fatal(err)
		}
		left := time.Duration(ends-(now[0]*1000+now[1]/1000)) * time.Millisecond
		expires := time.Now().Add(left)
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(left + 3*timeout):
			t.Fatalf("round %d: the waiter behind a dead head did not acquire", round)
		}
		late := time.Since(expires)
		t.Logf("round %d: the waiter behind the dead head acquired %v after its place expired (%v after the kill)", round, late, left+late)
		if late > 200*time.Millisecond {
			t.Errorf("round %d: the waiter behind a dead head acquired %v after the head's place expired; want within 200ms", round, late)
		}
		if err := w.Release(ctx, 1); err != nil {
			t.Error(err)
		}
		if err := holder.Release(ctx, 1); err != nil {
			t.Error(err)
		}
	}
}
