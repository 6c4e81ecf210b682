package rueidis_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// stall keeps the server busy for ARGV[1] ms and returns 1.
var stall = backend.NewScript(`local t = redis.call('TIME'); local stop = t[1] * 1000000 + t[2] + tonumber(ARGV[1]) * 1000
while true do local n = redis.call('TIME'); if n[1] * 1000000 + n[2] > stop then break end end
return 1`)

// queuedTogether makes calls through b at once, each on a goroutine of
// its own with a context that can be cancelled, while a lone call of b's
// stalls the server: b's Pipeline queues them all behind it and sends them
// as one batch when it returns, as it does with the calls of unrelated
// callers under load. It returns their replies and errors, or false if
// the stall ended before all of them were queued (a loaded machine), in
// which case they may not have shared a batch.
func queuedTogether(t *testing.T, b backend.Backend, calls []backend.Call) (replies []any, errs []error, together bool) {
	t.Helper()
	ctx := context.Background()
	stalled := make(chan error, 1)
	go func() {
		// A deadline without Done: sent on this goroutine, as the
		// Pipeline's lone call, which the calls below queue behind.
		_, err := b.Eval(backend.DeadlineContext(ctx, time.Now().Add(10*time.Second)), stall, nil, 300)
		stalled <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); goroutines("rueidis.(*Backend).send", "rueidis_test.queuedTogether") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the stalling call was never sent")
		}
		time.Sleep(time.Millisecond)
	}
	replies, errs = make([]any, len(calls)), make([]error, len(calls))
	done := make(chan struct{}, len(calls))
	for i, c := range calls {
		go func() {
			defer func() { done <- struct{}{} }()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if c.Script == nil {
				var ok bool
				ok, errs[i] = b.(backend.Setter).SetNX(cctx, c.Keys[0], "v", time.Minute)
				replies[i] = ok
				return
			}
			replies[i], errs[i] = b.Eval(cctx, c.Script, c.Keys, c.Args...)
		}()
	}
	// The calls are queued once their goroutines wait in the Pipeline, and
	// nothing is sent while the stall is in flight.
	for deadline := time.Now().Add(5 * time.Second); !together && time.Now().Before(deadline); {
		select {
		case err := <-stalled:
			stalled <- err
			deadline = time.Now() // over: the calls went out as they came
		default:
			together = goroutines("backend.(*Pipeline).await", "rueidis_test.queuedTogether") == len(calls)
			if !together {
				time.Sleep(time.Millisecond)
			}
		}
	}
	if together {
		select {
		case <-stalled:
			together = false // perhaps over before the count was read
		default:
		}
	}
	for range calls {
		<-done
	}
	if err := <-stalled; err != nil {
		t.Fatalf("the stalling call: %v", err)
	}
	return replies, errs, together
}

// goroutines counts the goroutines whose stacks hold both frames.
func goroutines(frame, creator string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, frame) && strings.Contains(g, creator) {
			count++
		}
	}
	return count
}

// TestKeylessCallSharesBatchOnCluster: on a cluster, a call without keys
// (which any node may run) that the Pipeline batches with calls of keys on
// two slots is sent with them. rueidis's DoMulti panics at such a mix
// ("Mixing no-slot and cross slot commands"), which took down the program
// from the Pipeline's goroutine when unrelated callers' calls met in one
// batch.
func TestKeylessCallSharesBatchOnCluster(t *testing.T) {
	cl := harness.NewCluster(t, 3)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := dsyncrueidis.New(c)
	defer b.Close()
	ctx := context.Background()
	calls := []backend.Call{{Script: one}, {Script: one, Keys: []string{"{a}k"}}, {Script: one, Keys: []string{"{b}k"}}, {Keys: []string{"{c}set"}}}
	results, err := b.EvalBatch(ctx, calls[:3])
	if err != nil {
		t.Fatalf("EvalBatch of a keyless call and calls on two slots: %v", err)
	}
	for i, r := range results {
		if r.Err != nil || r.Reply != int64(1) {
			t.Errorf("EvalBatch's call %d: %#v, %v; want 1", i, r.Reply, r.Err)
		}
	}
	for attempt := 0; ; attempt++ {
		replies, errs, together := queuedTogether(t, b, calls)
		if !together && attempt < 5 {
			continue
		}
		if !together {
			t.Log("the calls never met in one batch: not checked")
		}
		for i := range calls {
			want := any(int64(1))
			if calls[i].Script == nil {
				want = attempt == 0
			}
			if errs[i] != nil || replies[i] != want {
				t.Errorf("call %d of a batch mixing a keyless call with calls on several slots: %#v, %v; want %v", i, replies[i], errs[i], want)
			}
		}
		break
	}
}

// nonInteger replies a double that no int64 holds, over RESP3 (which
// rueidis speaks): dsync.ErrUnexpectedReply for its caller.
var nonInteger = backend.NewScript(`return {double = 1e300}`)

// TestUnexpectedReplyStaysItsCallers: a reply that cannot be normalized
// fails its own call with dsync.ErrUnexpectedReply, not the other calls
// of its batch, which ran and got their replies: those of other callers,
// when the Pipeline batches unrelated calls, which would otherwise fail
// with an error dsync does not retry, their effects done.
func TestUnexpectedReplyStaysItsCallers(t *testing.T) {
	srv := harness.Standalone(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := dsyncrueidis.New(c)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Eval(ctx, nonInteger, nil); !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Fatalf("a reply of 1e300: %v, want ErrUnexpectedReply", err)
	}
	results, err := b.EvalBatch(ctx, []backend.Call{{Script: nonInteger}, {Script: one}})
	if err != nil {
		t.Errorf("EvalBatch with a call whose reply is 1e300: %v", err)
	} else if !errors.Is(results[0].Err, dsync.ErrUnexpectedReply) || results[1].Reply != int64(1) || results[1].Err != nil {
		t.Errorf("EvalBatch with a call whose reply is 1e300: %+v; want ErrUnexpectedReply, then 1", results)
	}
	for attempt := 0; ; attempt++ {
		replies, errs, together := queuedTogether(t, b, []backend.Call{{Script: nonInteger}, {Script: one}, {Script: one}})
		if !together && attempt < 5 {
			continue
		}
		if !together {
			t.Log("the calls never met in one batch: not checked")
		}
		if !errors.Is(errs[0], dsync.ErrUnexpectedReply) {
			t.Errorf("the call whose reply is 1e300: %v, want ErrUnexpectedReply", errs[0])
		}
		for i := 1; i < 3; i++ {
			if errs[i] != nil || replies[i] != int64(1) {
				t.Errorf("a call batched with another caller's reply of 1e300: %#v, %v; want 1", replies[i], errs[i])
			}
		}
		break
	}
}
