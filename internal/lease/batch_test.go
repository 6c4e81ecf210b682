package lease

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
)

// Renewals batched per backend, and per slot on a sharded one.

// TestBatchedRenewal starts 1,000 watchdog leases within 10ms on one
// backend: they are renewed in ceil(1000/MaxBatch) calls of at most
// MaxBatch leases, at TTL/3 after their acquisition, round after round.
func TestBatchedRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const n = 1000
		const ttl = 3 * time.Second
		const rounds = 6
		interval := ttl / 3
		perRound := (n + MaxBatch - 1) / MaxBatch

		t0 := time.Now()
		keys := make([]string, n)
		sent := make([]time.Time, n)
		ls := make([]*Lease, n)
		for i := range n {
			keys[i] = fmt.Sprintf("batch:%d", i)
			sent[i] = time.Now()
			ls[i] = h.start(f, watchdog(keys[i], ttl), sent[i])
			time.Sleep(10 * time.Microsecond)
		}
		if leases, calls := Stats(f); leases != n || calls != 0 {
			t.Fatalf("Stats = %d leases, %d calls; want %d, 0", leases, calls, n)
		}

		sleepUntil(t0.Add(interval - interval/2 - time.Millisecond))
		if c := f.numCalls(); c != 0 {
			t.Fatalf("%d renewal calls before TTL/3 - TTL/6", c)
		}
		sleepUntil(t0.Add(rounds*interval + interval/2))

		calls := f.callLog()
		if len(calls) == 0 {
			t.Fatal("no renewal call")
		}
		if first := calls[0].at.Sub(t0); first != interval {
			t.Errorf("first renewal call %v after the first acquisition, want TTL/3 = %v", first, interval)
		}
		for i, c := range calls {
			if len(c.holds) > MaxBatch {
				t.Errorf("call %d renews %d leases, more than MaxBatch %d", i, len(c.holds), MaxBatch)
			}
			if c.nkeys != 1 || c.nargs != 3 {
				t.Errorf("call %d: ARGV says %d keys, %d args per lease; want 1, 3", i, c.nkeys, c.nargs)
			}
		}
		// Per interval: few calls, which renew every lease once.
		for k := 1; k <= rounds; k++ {
			from := t0.Add(time.Duration(k)*interval - interval/2)
			to := from.Add(interval)
			nc, nl := 0, 0
			for _, c := range calls {
				if !c.at.Before(from) && c.at.Before(to) {
					nc++
					nl += len(c.holds)
				}
			}
			if nc > perRound+2 || nc < perRound {
				t.Errorf("round %d: %d calls, want between %d and %d", k, nc, perRound, perRound+2)
			}
			if nl != n {
				t.Errorf("round %d: %d leases renewed, want %d", k, nl, n)
			}
		}
		checkRenewalGaps(t, f, keys, sent, ttl, rounds)
		for _, l := range ls {
			if isDone(l) {
				t.Fatalf("%s ended (lost %v)", l.spec.Name, l.Lost())
			}
		}
		if leases, c := Stats(f); leases != n || c != int64(len(calls)) {
			t.Errorf("Stats = %d leases, %d calls; want %d, %d", leases, c, n, len(calls))
		}
	})
}

// TestSpreadLeasesCoalesce starts 1,000 leases spread over a whole renewal
// interval: the early window (TTL/6) gathers them into one cohort within
// two rounds, which then renews in ceil(1000/MaxBatch) calls per interval.
func TestSpreadLeasesCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const n = 1000
		const ttl = 3 * time.Second
		const rounds = 8
		interval := ttl / 3
		perRound := (n + MaxBatch - 1) / MaxBatch

		t0 := time.Now()
		keys := make([]string, n)
		sent := make([]time.Time, n)
		for i := range n {
			keys[i] = fmt.Sprintf("spread:%d", i)
			sent[i] = time.Now()
			h.start(f, watchdog(keys[i], ttl), sent[i])
			time.Sleep(interval / n) // 1,000 starts over one interval
		}
		end := t0.Add(rounds * interval)
		sleepUntil(end)

		calls := f.callLog()
		// Group the calls by instant: once coalesced, each instant renews
		// every lease.
		type instant struct {
			at           time.Time
			calls, holds int
		}
		var ins []instant
		for _, c := range calls {
			if len(ins) == 0 || !ins[len(ins)-1].at.Equal(c.at) {
				ins = append(ins, instant{at: c.at})
			}
			ins[len(ins)-1].calls++
			ins[len(ins)-1].holds += len(c.holds)
		}
		settled := -1
		for i, in := range ins {
			if in.holds == n {
				settled = i
				break
			}
		}
		if settled < 0 {
			t.Fatalf("the leases never renewed as one cohort; instants: %+v", ins)
		}
		if settled > 2 {
			t.Errorf("coalesced after %d rounds, want at most 2", settled)
		}
		if ins[settled].at.After(t0.Add(3 * interval)) {
			t.Errorf("coalesced only at %v", ins[settled].at.Sub(t0))
		}
		for i, in := range ins[settled:] {
			if in.holds != n || in.calls != perRound {
				t.Errorf("after coalescing, instant %d (%v): %d calls renewing %d leases, want %d calls renewing %d",
					i, in.at.Sub(t0), in.calls, in.holds, perRound, n)
			}
			if i > 0 {
				if gap := in.at.Sub(ins[settled+i-1].at); gap != interval {
					t.Errorf("after coalescing, cohort renewed %v after the previous round, want %v", gap, interval)
				}
			}
		}
		// Per interval from the settling on, at most perRound calls.
		for from := ins[settled].at; from.Add(interval).Before(end); from = from.Add(interval) {
			nc := 0
			for _, c := range calls {
				if !c.at.Before(from) && c.at.Before(from.Add(interval)) {
					nc++
				}
			}
			if nc > perRound {
				t.Errorf("interval from %v: %d calls, want at most %d", from.Sub(t0), nc, perRound)
			}
		}
		checkRenewalGaps(t, f, keys, sent, ttl, rounds-2)
		for _, l := range h.leases {
			if isDone(l) {
				t.Fatalf("%s ended (lost %v)", l.spec.Name, l.Lost())
			}
		}
	})
}

// TestShardedBatchesBySlot: on a sharded backend a batch never mixes
// hash slots, and leases of different scripts go in different calls.
func TestShardedBatchesBySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		f.sharded = true
		const ttl = 3 * time.Second
		t0 := time.Now()
		var all []string
		for i := range 30 {
			key := fmt.Sprintf("{tag%d}:lock:%d", i%3, i)
			spec := watchdog(key, ttl)
			if i%2 == 1 {
				spec.Renew = scriptB
			}
			all = append(all, key)
			h.start(f, spec, t0)
		}
		sleepUntil(t0.Add(ttl/3 + time.Millisecond))
		calls := f.callLog()
		if len(calls) != 6 {
			t.Errorf("%d calls, want 6 (3 slots x 2 scripts)", len(calls))
		}
		seen := 0
		for _, c := range calls {
			slot := keys.Slot(c.holds[0])
			for _, k := range c.holds {
				if keys.Slot(k) != slot {
					t.Errorf("call mixes slots: %v", c.holds)
				}
				i := 0
				fmt.Sscanf(k[strings.LastIndexByte(k, ':')+1:], "%d", &i)
				if (i%2 == 1) != (c.script == scriptB) {
					t.Errorf("lease %s renewed by the wrong script", k)
				}
			}
			seen += len(c.holds)
		}
		if seen != len(all) {
			t.Errorf("%d leases renewed, want %d", seen, len(all))
		}
	})
}

// TestCrossSlotLosesBatchAtOnce: a renewal refused with CROSSSLOT (a
// backend over a cluster that does not report Sharded) can never succeed:
// every lease of the batch is lost at once, not retried until its lease
// runs out, and the cause is logged at Error, once per batch and logger.
func TestCrossSlotLosesBatchAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		var buf syncBuffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		const ttl = 3 * time.Second
		t0 := time.Now()
		var ls []*Lease
		for i := range 3 {
			spec := watchdog(fmt.Sprintf("{s%d}:lock", i), ttl)
			spec.Logger = logger
			ls = append(ls, h.start(f, spec, t0))
		}
		f.setErr(&backend.ServerError{Message: "CROSSSLOT Keys in request don't hash to the same slot"})
		sleepUntil(t0.Add(ttl / 3))
		for _, l := range ls {
			assertEnded(t, f, l, true)
		}
		sleepUntil(t0.Add(2 * ttl))
		if c := f.numCalls(); c != 1 {
			t.Errorf("%d calls, want 1 (no retry after CROSSSLOT)", c)
		}
		out := buf.String()
		if n := strings.Count(out, "level=ERROR"); n != 1 || !strings.Contains(out, "backend.Sharded") || !strings.Contains(out, "CROSSSLOT") {
			t.Errorf("want one Error naming CROSSSLOT and backend.Sharded, got:\n%s", out)
		}
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// batchFake is a sharded fake that also implements backend.Batcher, by
// running each call of a batch through the fake's Eval.
type batchFake struct {
	*fakeBackend

	mu      sync.Mutex
	batches []int // calls per EvalBatch
	failOne bool  // the next EvalBatch fails as a whole
}

func (b *batchFake) EvalBatch(ctx context.Context, calls []backend.Call) ([]backend.Result, error) {
	b.mu.Lock()
	b.batches = append(b.batches, len(calls))
	fail := b.failOne
	b.failOne = false
	b.mu.Unlock()
	if fail {
		return nil, errUnavailable
	}
	results := make([]backend.Result, len(calls))
	for i, c := range calls {
		results[i].Reply, results[i].Err = b.fakeBackend.Eval(ctx, c.Script, c.Keys, c.Args...)
	}
	return results, nil
}

func (b *batchFake) batchLog() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.batches)
}

// TestBatcherBundlesSlots: on a sharded backend that implements Batcher,
// the per-slot renewals of a round go out in EvalBatch calls of up to
// MaxBundle slots each, which count as one call each; a batch failing as a
// whole is retried, and no lease is lost for it.
func TestBatcherBundlesSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		f.sharded = true
		b := &batchFake{fakeBackend: f}
		const n, ttl = 2500, 3 * time.Second
		t0 := time.Now()
		slots := map[uint16]bool{}
		var ls []*Lease
		for i := range n {
			spec := watchdog(fmt.Sprintf("{k%d}:lock", i), ttl)
			slots[keys.Slot(spec.Key)] = true
			f.acquire(spec.Key, t0, ttl)
			l := Start(b, spec, t0)
			h.leases = append(h.leases, l)
			ls = append(ls, l)
		}
		want := (len(slots) + MaxBundle - 1) / MaxBundle
		sleepUntil(t0.Add(ttl/3 + time.Millisecond))
		batches := b.batchLog()
		if len(batches) != want {
			t.Errorf("%d EvalBatch calls for %d slots, want %d: %v", len(batches), len(slots), want, batches)
		}
		if _, calls := Stats(b); calls != int64(len(batches)) {
			t.Errorf("Stats counts %d calls, want %d (one per EvalBatch)", calls, len(batches))
		}
		for _, c := range f.callLog() {
			for _, k := range c.holds {
				if keys.Slot(k) != keys.Slot(c.holds[0]) {
					t.Fatalf("a call of the batch mixes slots: %v", c.holds)
				}
			}
		}
		for _, l := range ls {
			if got := len(f.renewedAt(l.spec.Key)); got != 1 {
				t.Fatalf("%s renewed %d times in the first round, want 1", l.spec.Key, got)
			}
		}

		// A round whose batches fail as a whole is retried soon after,
		// and nothing is lost.
		b.mu.Lock()
		b.failOne = true
		b.mu.Unlock()
		sleepUntil(t0.Add(2*ttl/3 + ttl/10 + 10*time.Millisecond))
		for _, l := range ls {
			assertActive(t, b, l)
		}
		for _, l := range ls {
			if got := len(f.renewedAt(l.spec.Key)); got < 2 {
				t.Fatalf("%s renewed %d times after a failed batch and its retry, want 2", l.spec.Key, got)
			}
		}
	})
}
