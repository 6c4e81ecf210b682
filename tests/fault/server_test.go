package fault

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/gomodule/redigo/redis"
)

// pauseServer makes srv unresponsive for d, with DEBUG SLEEP or with
// SIGSTOP and SIGCONT, and returns once the pause has begun, with a
// function that waits for its end.
func pauseServer(t *testing.T, srv *harness.Server, how string, d time.Duration) (wait func()) {
	t.Helper()
	switch how {
	case "DEBUG SLEEP":
		// The command is written before the server is probed: a probe
		// that goes unanswered on a loaded machine, before a goroutine
		// even sent the command, would not mean the server sleeps.
		c, err := redis.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send("DEBUG", "SLEEP", fmt.Sprintf("%.3f", d.Seconds())); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			defer c.Close()
			_, err := c.Receive()
			done <- err
		}()
		awaitUnresponsive(t, srv.Addr())
		return func() {
			if err := <-done; err != nil {
				t.Errorf("DEBUG SLEEP: %v", err)
			}
		}
	case "SIGSTOP":
		if err := srv.Node().Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		timer := time.NewTimer(d)
		return func() {
			<-timer.C
			if err := srv.Node().Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Fatalf("unknown pause %q", how)
	return nil
}

// awaitUnresponsive returns once a PING to addr goes unanswered for 50ms.
func awaitUnresponsive(t *testing.T, addr string) {
	t.Helper()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := do(ctx, addr, "PING")
		cancel()
		if err != nil {
			return
		}
		if i == 100 {
			t.Fatal("the server still answers PING")
		}
	}
}

// A server that stops answering for longer than a watchdog lease (a stall,
// DEBUG SLEEP, or a process paused, SIGSTOP): the holder's renewals fail
// until its lease runs out, and it is told (Done) within the lease; once
// the server is back, a waiter that was blocked acquires, with a higher
// fencing token, and the old holder's fenced write is refused.
func TestServerPausedPastLease(t *testing.T) {
	for _, how := range []string{"DEBUG SLEEP", "SIGSTOP"} {
		t.Run(how, func(t *testing.T) {
			srv := startServer(t)
			reg := register{addr: startServer(t).Addr(), key: "register"}
			const lease = time.Second
			holder := mutex.New(newBackend(t, srv.Addr()), "paused", mutex.WithWatchdog(lease), mutex.WithLogger(nil))
			waiter := mutex.New(newBackend(t, srv.Addr()), "paused", mutex.WithWatchdog(lease), mutex.WithLogger(nil))
			hctx := dsync.WithOwner(context.Background())
			wctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 10*time.Second)
			defer cancel()
			if err := holder.LockContext(hctx); err != nil {
				t.Fatal(err)
			}
			htoken, _ := holder.Token(hctx)
			if ok, v, err := reg.Read(hctx, htoken); !ok || err != nil {
				t.Fatal(ok, v, err)
			}
			acquired := make(chan error, 1)
			go func() { acquired <- waiter.LockContext(wctx) }()

			end := pauseServer(t, srv, how, 2*lease)
			paused := time.Now()
			select {
			case <-holder.Done(hctx):
			case <-time.After(2 * lease):
				t.Fatal("holder not told of its loss while the server was away")
			}
			told := time.Since(paused)
			end()
			back := time.Now()
			if err := <-acquired; err != nil {
				t.Fatalf("waiter: %v", err)
			}
			wtoken, err := waiter.Token(wctx)
			if err != nil {
				t.Fatalf("LockContext returned a hold already lost: %v", err)
			}
			t.Logf("%s for %v: holder told %v into the pause; waiter acquired %v after the server was back",
				how, 2*lease, told.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
			if told > lease {
				t.Errorf("holder told %v into the pause; want within the lease (%v)", told, lease)
			}
			if wtoken <= htoken {
				t.Errorf("waiter's token %d not above the lost hold's %d", wtoken, htoken)
			}
			if ok, _, err := reg.Read(wctx, wtoken); !ok || err != nil {
				t.Fatalf("waiter's fenced read refused: %v", err)
			}
			if ok, err := reg.Write(hctx, htoken, 42); ok || err != nil {
				t.Errorf("the old holder's fenced write: accepted %v, %v; want it refused", ok, err)
			}
			waiter.UnlockContext(wctx)
		})
	}
}

// A server killed with SIGKILL and restarted with its data on disk
// (appendonly yes, appendfsync always) keeps the hold: the holder's Done
// stays open across the restart and renewals after it, another owner
// cannot take the mutex, and the holder's unlock succeeds.
func TestRestartWithAOFKeepsHold(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	const lease = time.Second
	holder := mutex.New(newBackend(t, srv.Addr()), "aof", mutex.WithWatchdog(lease), mutex.WithLogger(nil))
	other := mutex.New(newBackend(t, srv.Addr()), "aof", mutex.WithLogger(nil))
	ctx := dsync.WithOwner(context.Background())
	if err := holder.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Node().Restart(rctx); err != nil {
		t.Fatal(err)
	}
	down := time.Since(start)
	select {
	case <-holder.Done(ctx):
		t.Fatal("hold lost across a restart with appendfsync always")
	case <-time.After(3 * lease): // the check at reconnection, and renewals
	}
	if ok, err := other.TryLockContext(context.Background()); ok || err != nil {
		t.Fatalf("another owner's TryLockContext after the restart: %v, %v; want false", ok, err)
	}
	if err := holder.UnlockContext(ctx); err != nil {
		t.Fatalf("unlock after the restart: %v", err)
	}
	t.Logf("restart with AOF (down %v): hold kept for 3 leases after it, then released", down.Round(time.Millisecond))
}

// A server that stays down past a fixed lease: the holder is told at the
// lease's end, less the margin, with no server to ask; after the server
// comes back (without its data, or with it: the hold has expired either
// way) another owner acquires at once.
func TestServerDownPastLease(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	const lease = 500 * time.Millisecond
	holder := mutex.New(newBackend(t, srv.Addr()), "down", mutex.WithLease(lease), mutex.WithLogger(nil))
	other := mutex.New(newBackend(t, srv.Addr()), "down", mutex.WithLogger(nil))
	ctx := dsync.WithOwner(context.Background())
	// The heartbeat tells how long the process went without running
	// meanwhile: Done's close is seen that much later at most.
	hb := startHeartbeat()
	start := time.Now()
	if err := holder.LockContext(ctx); err != nil {
		hb.stop()
		t.Fatal(err)
	}
	srv.Node().Kill()
	<-holder.Done(ctx)
	told := time.Since(start)
	stall := maxGap(hb.stop(), start, start.Add(told))
	time.Sleep(lease - told + 50*time.Millisecond) // past the lease on the server too
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Node().Start(rctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.TryLockContext(rctx); !ok || err != nil {
		t.Fatalf("after the server came back past the lease: TryLockContext = %v, %v; want the mutex free", ok, err)
	}
	if err := holder.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("the expired holder's unlock: %v; want dsync.ErrNotHeld", err)
	}
	t.Logf("server down past a %v fixed lease: holder told after %v; the mutex was free once the server was back", lease, told.Round(time.Millisecond))
	if told > lease+stall {
		t.Errorf("holder told after %v; want by the lease (%v), and %v more for the longest stall of the process meanwhile", told, lease, stall)
	}
}

// A call sent before a stall and answered after it, later than the lease
// it asks for: the hold is on the server, but counted from when the call
// was sent its lease has run out. The acquisition asks again (the same
// operation, so it is not counted twice) and returns a hold that is
// valid, not one already lost. Before the fix, LockContext and
// TryLockContext returned success with Done already closed.
func TestReplyAfterLease(t *testing.T) {
	srv := startServer(t)
	const lease = 500 * time.Millisecond
	for _, try := range []bool{false, true} {
		m := mutex.New(newBackend(t, srv.Addr()), fmt.Sprint("late:", try), mutex.WithLease(lease), mutex.WithLogger(nil))
		ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 5*time.Second)
		loadScripts(t, m) // so that the call during the stall runs
		end := pauseServer(t, srv, "DEBUG SLEEP", 2*lease)
		var err error
		if try {
			var ok bool
			ok, err = m.TryLockContext(ctx)
			if !ok && err == nil {
				err = errors.New("not acquired")
			}
		} else {
			err = m.LockContext(ctx)
		}
		end()
		if err != nil {
			t.Fatalf("try %v: %v", try, err)
		}
		select {
		case <-m.Done(ctx):
			t.Errorf("try %v: the acquisition answered after its lease returned a hold already lost", try)
		case <-time.After(lease / 5):
		}
		if err := m.UnlockContext(ctx); err != nil {
			t.Errorf("try %v: unlock: %v", try, err)
		}
		cancel()
	}
}
