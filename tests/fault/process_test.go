package fault

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
)

// A holder process killed with SIGKILL: its watchdog stops with it, and a
// waiter acquires when its lease runs out, within lease + 200ms of the
// kill.
func TestHolderProcessKilled(t *testing.T) {
	srv := startServer(t)
	const lease = time.Second
	holder := startChild(t, "holder", srv.Addr(), "killed", lease.String(), "watchdog")
	holder.expect(t, "locked", 5*time.Second)
	waiter := mutex.New(newBackend(t, srv.Addr()), "killed", mutex.WithLogger(nil))
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 5*time.Second)
	defer cancel()
	acquired := make(chan error, 1)
	go func() { acquired <- waiter.LockContext(ctx) }()
	awaitWaiters(t, waiter, 1)
	holder.kill()
	killed := time.Now()
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	took := time.Since(killed)
	waiter.UnlockContext(ctx)
	t.Logf("holder process killed: waiter acquired %v after the kill (lease %v)", took.Round(time.Millisecond), lease)
	if took > lease+200*time.Millisecond {
		t.Errorf("waiter acquired %v after the kill; want within lease + 200ms", took)
	}
}

// A waiter process killed while queued: a release may hand it the mutex,
// which it cannot take, but only on a short lease (2s at most). A live
// waiter, not woken by a hand-off to another, acquires at its next
// attempt, within its 5s heartbeat of the release: nothing waits for the
// dead one's registration to expire (15s).
func TestWaiterProcessKilled(t *testing.T) {
	srv := startServer(t)
	holder := mutex.New(newBackend(t, srv.Addr()), "deadwaiter", mutex.WithLogger(nil))
	hctx := dsync.WithOwner(context.Background())
	if err := holder.LockContext(hctx); err != nil {
		t.Fatal(err)
	}
	dead := startChild(t, "holder", srv.Addr(), "deadwaiter", "30s", "watchdog")
	awaitWaiters(t, holder, 1)
	live := mutex.New(newBackend(t, srv.Addr()), "deadwaiter", mutex.WithLogger(nil))
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 10*time.Second)
	defer cancel()
	acquired := make(chan error, 1)
	go func() { acquired <- live.LockContext(ctx) }()
	awaitWaiters(t, holder, 2)
	dead.kill()
	released := time.Now()
	if err := holder.UnlockContext(hctx); err != nil {
		t.Fatal(err)
	}
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	took := time.Since(released)
	live.UnlockContext(ctx)
	t.Logf("a queued waiter process killed: the live waiter acquired %v after the release", took.Round(time.Millisecond))
	if took > 5*time.Second+200*time.Millisecond {
		t.Errorf("live waiter acquired %v after the release; want within the 5s heartbeat + 200ms", took)
	}
}

// A holder process paused (SIGSTOP) past its lease, as a long GC pause or
// a swapped-out process would be: a waiter acquires once the lease runs
// out, with a higher token. When the paused holder resumes it is told its
// hold is lost, and its fenced write, with its old token, is refused by
// the resource, which has seen the new holder's token.
func TestHolderProcessPaused(t *testing.T) {
	srv := startServer(t)
	reg := register{addr: startServer(t).Addr(), key: "register"}
	const lease = time.Second
	holder := startChild(t, "holder", srv.Addr(), "paused-client", lease.String(), "watchdog")
	htoken, _ := strconv.ParseInt(holder.expect(t, "locked", 5*time.Second), 10, 64)
	waiter := mutex.New(newBackend(t, srv.Addr()), "paused-client", mutex.WithLogger(nil))
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 10*time.Second)
	defer cancel()

	holder.signal(t, syscall.SIGSTOP)
	paused := time.Now()
	if err := waiter.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(paused)
	wtoken, _ := waiter.Token(ctx)
	if ok, _, err := reg.Read(ctx, wtoken); !ok || err != nil {
		t.Fatalf("new holder's fenced read: %v, %v", ok, err)
	}
	holder.signal(t, syscall.SIGCONT)
	resumed := time.Now()
	holder.expect(t, "lost", 2*time.Second)
	told := time.Since(resumed)
	holder.send(t, fmt.Sprintf("write %s 1", reg.addr))
	if r := holder.expect(t, "write", 5*time.Second); r != "false <nil>" {
		t.Errorf("the resumed holder's fenced write (token %d, new holder's %d): %s; want it refused", htoken, wtoken, r)
	}
	waiter.UnlockContext(ctx)
	t.Logf("holder process paused past its %v lease: waiter acquired %v after the pause; the resumed holder was told %v after SIGCONT and its write was refused",
		lease, took.Round(time.Millisecond), told.Round(time.Millisecond))
	if wtoken <= htoken {
		t.Errorf("new token %d not above the paused holder's %d", wtoken, htoken)
	}
}
