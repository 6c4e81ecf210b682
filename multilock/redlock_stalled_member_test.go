package multilock_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// silentServer accepts connections and reads what they send, replying
// nothing: a server that stalls, until stop is called or t ends.
func silentServer(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { io.Copy(io.Discard, c) })
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ln.Close()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// A RedLock round bounds every member's attempt by the member timeout,
// from the round's start: with 2 of 5 servers stalled, the lock is
// taken once the timeout has passed for them, not at ctx's deadline, and
// the live members are held.
func TestRedLockStalledMembersCostOneMemberTimeout(t *testing.T) {
	ss := servers(t, 3)
	name := t.Name()
	var ls []dsync.Locker
	var live []*mutex.Mutex
	for _, s := range ss {
		m := mutex.New(newBackend(t, s.Addr()), name)
		live = append(live, m)
		ls = append(ls, m)
	}
	for range 2 {
		addr, stop := silentServer(t)
		// Stopped before the backends close, which wait for the calls
		// that the stalled servers never answered.
		defer stop()
		ls = append(ls, mutex.New(newBackend(t, addr), name))
	}
	l := multilock.RedLock(ls...)
	ctx := dsync.WithOwner(deadline(t, 20*time.Second))
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := l.LockContext(lctx); err != nil {
		t.Fatalf("RedLock with 2 of 5 servers stalled: %v", err)
	}
	// The default lease makes the member timeout 1s; the rest is load.
	el := time.Since(start)
	t.Logf("LockContext took %v", el)
	if el > 5*time.Second {
		t.Errorf("RedLock with 2 of 5 stalled took %v; want about the member timeout, 1s", el)
	}
	for i, m := range live {
		if free(t, m) {
			t.Errorf("live member %d is free while RedLock holds it", i)
		}
	}
	uctx, ucancel := context.WithTimeout(ctx, 3*time.Second)
	defer ucancel()
	if err := l.UnlockContext(uctx); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	for i, m := range live {
		if !free(t, m) {
			t.Errorf("live member %d held after the unlock", i)
		}
	}
}
