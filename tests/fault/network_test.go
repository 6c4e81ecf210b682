package fault

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
)

// A holder cut off from the server by a partition loses its hold when its
// watchdog lease runs out, and is told before anyone else can acquire:
// when the waiter on the other side acquires, the holder's Done has
// closed. After the partition heals the holder's unlock reports the loss,
// and it can lock again once the waiter unlocks.
func TestPartitionHolderLosesHold(t *testing.T) {
	srv := startServer(t)
	px := newProxy(t, srv.Addr())
	const lease = time.Second
	holder := mutex.New(newBackend(t, px.Addr()), "partition", mutex.WithWatchdog(lease), mutex.WithLogger(nil))
	waiter := mutex.New(newBackend(t, srv.Addr()), "partition", mutex.WithWatchdog(lease), mutex.WithLogger(nil))
	hctx := dsync.WithOwner(context.Background())
	wctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 10*time.Second)
	defer cancel()
	if err := holder.LockContext(hctx); err != nil {
		t.Fatal(err)
	}
	token, _ := holder.Token(hctx)

	px.Partition(t)
	cut := time.Now()
	// The heartbeat tells how long the process went without running
	// meanwhile: Done's close is seen that much later at most.
	hb := startHeartbeat()
	acquired := make(chan error, 1)
	var doneFirst bool
	go func() {
		err := waiter.LockContext(wctx)
		select {
		case <-holder.Done(hctx):
			doneFirst = true
		default:
		}
		acquired <- err
	}()
	var lostAfter time.Duration
	select {
	case <-holder.Done(hctx):
		lostAfter = time.Since(cut)
	case <-time.After(3 * lease):
		hb.stop()
		t.Fatalf("the partitioned holder's Done is still open %v after the cut", 3*lease)
	}
	stall := maxGap(hb.stop(), cut, cut.Add(lostAfter))
	if err := <-acquired; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	acquiredAfter := time.Since(cut)
	wtoken, _ := waiter.Token(wctx)
	t.Logf("partition: holder told after %v, waiter acquired after %v (lease %v)", lostAfter.Round(time.Millisecond), acquiredAfter.Round(time.Millisecond), lease)
	if !doneFirst {
		t.Error("the waiter acquired before the partitioned holder's Done closed")
	}
	if lostAfter > lease+stall {
		t.Errorf("holder told %v after the cut; want within the lease (%v), and %v more for the longest stall of the process meanwhile", lostAfter, lease, stall)
	}
	if wtoken <= token {
		t.Errorf("waiter's token %d is not above the lost hold's %d", wtoken, token)
	}

	px.Heal(t)
	if err := holder.UnlockContext(hctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("holder's unlock after the loss: %v; want dsync.ErrNotHeld", err)
	}
	if err := waiter.UnlockContext(wctx); err != nil {
		t.Fatal(err)
	}
	ctx, cancel2 := context.WithTimeout(hctx, 5*time.Second)
	defer cancel2()
	if err := holder.LockContext(ctx); err != nil {
		t.Fatalf("holder after the partition healed: %v", err)
	}
	holder.UnlockContext(ctx)
}

// With every reply delayed by 150ms, locks still work and a watchdog hold
// of 1s survives 3s without a loss: renewals take longer, not too long.
func TestLatency(t *testing.T) {
	srv := startServer(t)
	px := newProxy(t, srv.Addr())
	end := px.Latency(t, 150*time.Millisecond)
	defer end()
	m := mutex.New(newBackend(t, px.Addr()), "latency", mutex.WithWatchdog(time.Second), mutex.WithLogger(nil))
	ctx := dsync.WithOwner(context.Background())
	start := time.Now()
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	select {
	case <-m.Done(ctx):
		t.Fatal("hold lost under 150ms latency")
	case <-time.After(3 * time.Second):
	}
	start = time.Now()
	if err := m.UnlockContext(ctx); err != nil {
		t.Fatalf("unlock under latency: %v", err)
	}
	t.Logf("150ms reply latency: lock took %v, unlock %v; a 1s watchdog hold survived 3s", took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// Ambiguous replies: the server runs every command but no reply comes
// back. A LockContext that times out then has acquired on the server
// without knowing it; its clean-up, whose reply is lost too, still runs
// there and undoes the acquisition: the mutex is free while replies are
// still being dropped, not after the lease. An unlock whose reply is lost
// has released on the server; once the connections are reset, its retry
// finds the hold gone and reports success, without releasing twice.
func TestDroppedReplies(t *testing.T) {
	srv := startServer(t)
	px := newProxy(t, srv.Addr())
	const lease = 10 * time.Second
	m := mutex.New(newBackend(t, px.Addr()), "dropped", mutex.WithWatchdog(lease), mutex.WithLogger(nil))
	other := mutex.New(newBackend(t, srv.Addr()), "dropped", mutex.WithLogger(nil))
	bg := context.Background()

	// Every script is loaded first: with replies dropped, a script the
	// server does not know (NOSCRIPT) is never sent in full.
	other.Lock()
	warm, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	if err := m.LockContext(warm); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext while held elsewhere: %v", err)
	}
	cancel()
	other.Unlock()
	loadScripts(t, m)

	before := setCalls(t, srv)
	px.DropReplies(t)
	ctx, cancel := context.WithTimeout(dsync.WithOwner(bg), 300*time.Millisecond)
	err := m.LockContext(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext with every reply dropped: %v; want context.DeadlineExceeded", err)
	}
	start := time.Now()
	awaitFree(t, other, time.Second)
	// The acquisition is a plain SET (in the acquire script's fast path),
	// which draws no token: the server's count of SETs shows that it ran.
	if after := setCalls(t, srv); after <= before {
		t.Fatalf("%d SETs, before %d: the acquisition did not run on the server, and the test proves nothing", after, before)
	}
	t.Logf("an acquisition whose reply was lost was undone by its clean-up %v after LockContext returned", time.Since(start).Round(time.Millisecond))
	px.RestoreReplies(t)
	px.Reset(t) // ends the clean-up's call, whose reply was dropped
	wait.Settle()

	owner := dsync.WithOwner(bg)
	if err := m.LockContext(owner); err != nil {
		t.Fatal(err)
	}
	px.DropReplies(t)
	unlocked := make(chan error, 1)
	go func() { unlocked <- m.UnlockContext(owner) }()
	awaitFree(t, other, time.Second)
	px.RestoreReplies(t)
	px.Reset(t)
	if err := <-unlocked; err != nil {
		t.Errorf("UnlockContext whose first reply was dropped: %v; want its retry to report the release", err)
	}
	select {
	case <-m.Done(owner):
	default:
		t.Error("Done still open after the unlock")
	}
}

// awaitFree waits until m is free on the server, for at most d.
func awaitFree(t *testing.T, m *mutex.Mutex, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s, err := m.State(context.Background())
		if err == nil && !s.Locked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still held %v later: %+v, %v", m.Name(), d, s, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// loadScripts has the server load m's acquire and release scripts, by
// locking and unlocking it.
// setCalls returns how many SET commands the server has run, scripts'
// included.
func setCalls(t *testing.T, srv *harness.Server) int64 {
	t.Helper()
	v, err := srv.Node().Do(context.Background(), "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	}
	for _, line := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_set:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

func loadScripts(t *testing.T, m *mutex.Mutex) {
	t.Helper()
	ctx := dsync.WithOwner(context.Background())
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
}
