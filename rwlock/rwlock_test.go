package rwlock_test

import (
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
	"github.com/dsyncgo/dsync/rwlock"
)

// childEnv carries a child reader's instructions: address, prefix, name
// and fixed lease, separated by spaces.
const childEnv = "DSYNC_RWLOCK_CHILD"

// maybeChild runs this test binary as a reader process when asked to, and
// reports whether it did: it takes a read hold on a fixed lease, says so
// on stdout and waits to be killed.
func maybeChild() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	f := strings.Fields(spec)
	leaseD, _ := time.ParseDuration(f[3])
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", f[0]) }}
	m := rwlock.New(bredigo.New(pool), f[2], rwlock.WithPrefix(f[1]), rwlock.WithLease(leaseD))
	if err := m.RLockContext(context.Background()); err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	fmt.Println("reading")
	time.Sleep(time.Minute)
	os.Exit(4)
	return true
}

func prefix() string { return "rwtest:" + dsync.NewID()[:8] }

func TestSmoke(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix()
	a := rwlock.New(srv.NewBackend(t), "x", rwlock.WithPrefix(p))
	b := rwlock.New(srv.NewBackend(t), "x", rwlock.WithPrefix(p))
	a.RLock()
	b.RLock()
	st, err := a.State(ctx)
	if err != nil || st.Mode != rwlock.Read || st.Readers != 2 {
		t.Fatalf("State = %+v, %v; want 2 readers", st, err)
	}
	got := make(chan struct{})
	go func() { a.Lock(); close(got) }()
	select {
	case <-got:
		t.Fatal("writer acquired while read")
	case <-time.After(100 * time.Millisecond):
	}
	a.RUnlock()
	b.RUnlock()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("writer never acquired")
	}
	a.Unlock()
	_ = errors.Is
	_ = atomic.Int32{}
	_ = sync.Mutex{}
	_ = exec.Command
}
