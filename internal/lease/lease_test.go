package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
)

// The tests run in synctest bubbles: time is fake, and a renewal that the
// scheduler makes "at t" is recorded by the fake backend at exactly t.

var (
	scriptA = backend.NewScript("-- renew A")
	scriptB = backend.NewScript("-- renew B")
)

var errUnavailable = errors.New("fake: server unavailable")

// evalCall is one script call the fake backend received.
type evalCall struct {
	at     time.Time
	script *backend.Script
	holds  []string // the first key of each lease in the batch
	nkeys  int
	nargs  int
}

// fakeBackend is an in-memory server that implements the renewal contract
// of Spec.Renew: KEYS are the keys of every lease in the batch, ARGV =
// keys per lease, args per lease, then the args of every lease: its owner,
// its lease in milliseconds and its hold id. A lease's first key is its hold:
// a renewal finds it (1, and extends it) while it has not expired, else
// reports it gone (0).
type fakeBackend struct {
	t       *testing.T
	sharded bool

	mu       sync.Mutex
	exp      map[string]time.Time   // hold key -> expiry on the server
	renewals map[string][]time.Time // hold key -> successful renewals
	calls    []evalCall
	err      error                    // every call fails with it
	failNext int                      // the next calls fail with errUnavailable
	gate     chan struct{}            // calls block until it is closed
	stuck    map[*backend.Script]bool // calls of these block until ctx is done
	unstuck  chan struct{}            // closed by unblock, to end stuck calls
	inflight int
}

func newFake(t *testing.T) *fakeBackend {
	return &fakeBackend{
		t:        t,
		exp:      map[string]time.Time{},
		renewals: map[string][]time.Time{},
		stuck:    map[*backend.Script]bool{},
		unstuck:  make(chan struct{}),
	}
}

func (f *fakeBackend) Sharded() bool { return f.sharded }

func (f *fakeBackend) Subscribe(context.Context, string) (backend.Subscription, error) {
	return nil, errors.New("fake: no pub/sub")
}

func (f *fakeBackend) Close() error { return nil }

func asInt(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int64:
		return int(v), true
	}
	return 0, false
}

func (f *fakeBackend) Eval(ctx context.Context, s *backend.Script, ks []string, args ...any) (any, error) {
	c := evalCall{at: time.Now(), script: s}
	var n int
	bad := func(format string, a ...any) (any, error) {
		f.t.Errorf("fake: renewal call breaks the contract: "+format, a...)
		return nil, fmt.Errorf("fake: bad call")
	}
	if len(args) < 2 {
		return bad("%d args", len(args))
	}
	nk, ok1 := asInt(args[0])
	na, ok2 := asInt(args[1])
	if !ok1 || !ok2 || nk < 1 || na < 3 || len(ks)%nk != 0 {
		return bad("ARGV[1:2] = %v %v with %d keys", args[0], args[1], len(ks))
	}
	n = len(ks) / nk
	if len(args) != 2+n*na {
		return bad("%d leases of %d args, but %d args", n, na, len(args))
	}
	c.nkeys, c.nargs = nk, na
	for i := range n {
		c.holds = append(c.holds, ks[i*nk])
		if _, ok := asInt(args[2+i*na+1]); !ok {
			return bad("lease %d: second arg %v is not its lease in ms", i, args[2+i*na+1])
		}
	}

	f.mu.Lock()
	f.calls = append(f.calls, c)
	gate, stuck, unstuck := f.gate, f.stuck[s], f.unstuck
	f.inflight++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		f.t.Errorf("fake: renewal call without a deadline")
	}
	switch {
	case stuck:
		select {
		case <-ctx.Done():
		case <-unstuck:
			return nil, errUnavailable
		}
	case gate != nil:
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 {
		f.failNext--
		return nil, errUnavailable
	}
	if f.err != nil {
		return nil, f.err
	}
	now := time.Now()
	reply := make([]any, n)
	for i := range n {
		key := ks[i*nk]
		ms, _ := asInt(args[2+i*na+1])
		if exp, ok := f.exp[key]; ok && now.Before(exp) {
			f.exp[key] = now.Add(time.Duration(ms) * time.Millisecond)
			f.renewals[key] = append(f.renewals[key], now)
			reply[i] = int64(1)
		} else {
			delete(f.exp, key)
			reply[i] = int64(0)
		}
	}
	return reply, nil
}

// acquire makes the server hold key until sent+ttl.
func (f *fakeBackend) acquire(key string, sent time.Time, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exp[key] = sent.Add(ttl)
}

// drop deletes key on the server, as a release or an eviction would.
func (f *fakeBackend) drop(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.exp, key)
}

func (f *fakeBackend) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeBackend) failNextCalls(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = n
}

func (f *fakeBackend) setStuck(s *backend.Script) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stuck[s] = true
}

// block makes calls block until the returned function is called.
func (f *fakeBackend) block() (open func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := make(chan struct{})
	f.gate = g
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.gate == g {
			f.gate = nil
			close(g)
		}
	}
}

// unblock ends every kind of blocking and failure.
func (f *fakeBackend) unblock() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
	clear(f.stuck)
	close(f.unstuck)
	f.unstuck = make(chan struct{})
	f.err = nil
	f.failNext = 0
}

func (f *fakeBackend) callLog() []evalCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]evalCall(nil), f.calls...)
}

func (f *fakeBackend) numCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeBackend) inFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight
}

func (f *fakeBackend) renewedAt(key string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.renewals[key]...)
}

// callsOf returns the times of the calls whose batch included key.
func (f *fakeBackend) callsOf(key string) []time.Time {
	var ts []time.Time
	for _, c := range f.callLog() {
		for _, k := range c.holds {
			if k == key {
				ts = append(ts, c.at)
			}
		}
	}
	return ts
}

// harness makes fakes and starts leases, and cleans up so that the bubble
// ends: it unblocks the fakes, releases every lease and lets the
// schedulers retire.
type harness struct {
	t      *testing.T
	fakes  []*fakeBackend
	leases []*Lease
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t}
	t.Cleanup(func() {
		for _, f := range h.fakes {
			f.unblock()
		}
		for _, l := range h.leases {
			l.Release()
		}
		time.Sleep(3 * IdleRetire)
		synctest.Wait()
	})
	return h
}

func (h *harness) fake() *fakeBackend {
	f := newFake(h.t)
	h.fakes = append(h.fakes, f)
	return f
}

// start acquires spec's hold on f (for its Initial lease, if any) with a
// call sent at sent, and starts keeping it.
func (h *harness) start(f *fakeBackend, spec Spec, sent time.Time) *Lease {
	ttl := spec.TTL
	if spec.Initial > 0 && spec.Initial < ttl && spec.Renew != nil {
		ttl = spec.Initial
	}
	f.acquire(spec.Key, sent, ttl)
	l := Start(f, spec, sent)
	h.leases = append(h.leases, l)
	return l
}

// reenter records n more acquisitions of l's hold through f's scheduler.
func (h *harness) reenter(f *fakeBackend, l *Lease, n int) {
	for range n {
		if x := sched(f).Keep(l.spec, time.Now(), 0, 1); x != l {
			h.t.Fatalf("re-entry kept %p, want %p", x, l)
		}
	}
}

// watchdog returns the spec of a watchdog lease of key.
func watchdog(key string, ttl time.Duration) Spec {
	return Spec{
		Key:   key,
		Owner: "owner",
		Role:  "x",
		ID:    key + "#1",
		Name:  key,
		TTL:   ttl,
		Token: 7,
		Renew: scriptA,
		Keys:  []string{key},
	}
}

// fixed returns the spec of a fixed lease of key.
func fixed(key string, ttl time.Duration) Spec {
	s := watchdog(key, ttl)
	s.Renew, s.Keys, s.Fixed = nil, nil, true
	return s
}

// sleepUntil advances the fake clock to at and lets the bubble settle.
func sleepUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
	synctest.Wait()
}

func isDone(l *Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// The tests' sessions: a scheduler per fake backend, made on first use
// and dropped when it tells its session it is idle, as package session
// does.
var sessions struct {
	mu sync.Mutex
	m  map[backend.Backend]*Scheduler
}

// sched returns b's scheduler, made if it has none.
func sched(b backend.Backend) *Scheduler {
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	if s := sessions.m[b]; s != nil {
		return s
	}
	if sessions.m == nil {
		sessions.m = make(map[backend.Backend]*Scheduler)
	}
	var s *Scheduler
	s = NewScheduler(b, Hooks{Idle: func() {
		sessions.mu.Lock()
		defer sessions.mu.Unlock()
		if sessions.m[b] == s && s.Retire() {
			delete(sessions.m, b)
		}
	}})
	sessions.m[b] = s
	return s
}

// Start begins keeping a hold on b's scheduler.
func Start(b backend.Backend, spec Spec, sent time.Time) *Lease {
	for {
		if l := sched(b).Keep(spec, sent, 0, 1); l != nil {
			return l
		}
	}
}

// registered returns b's scheduler, or nil if it retired.
func registered(b backend.Backend) *Scheduler {
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	return sessions.m[b]
}

// Stats reports b's scheduler's leases and calls.
func Stats(b backend.Backend) (int, int64) {
	if s := registered(b); s != nil {
		return s.Stats()
	}
	return 0, 0
}

// Find returns the lease of key, owner and role that b's scheduler keeps,
// as a list of none or one.
func Find(b backend.Backend, key, owner, role string) []*Lease {
	if s := registered(b); s != nil {
		if l := s.Find(key, owner, role); l != nil {
			return []*Lease{l}
		}
	}
	return nil
}

// Get returns the lease of key, owner and role that b's scheduler keeps.
func Get(b backend.Backend, key, owner, role string) *Lease {
	if ls := Find(b, key, owner, role); len(ls) > 0 {
		return ls[0]
	}
	return nil
}

// ByID returns the lease of b's scheduler with the given hold id.
func ByID(b backend.Backend, key, owner, role, id string) *Lease {
	s := registered(b)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byIDLocked(key, owner, role, id)
}

// queued reports how many times l is in its scheduler's queue, and when
// it is next looked at.
func queued(l *Lease) (n int, next time.Time) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	for _, x := range l.s.queue {
		if x == l {
			n++
		}
	}
	return n, l.next
}

// schedulerGoroutines counts the goroutines running scheduler code.
func schedulerGoroutines() int {
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
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "internal/lease.(*Scheduler)") || strings.Contains(g, "internal/lease.(*fakeBackend)") {
			count++
		}
	}
	return count
}

// assertEnded checks that l ended (lost or not, as want) and left the
// index.
func assertEnded(t *testing.T, b backend.Backend, l *Lease, wantLost bool) {
	t.Helper()
	if !isDone(l) {
		t.Fatalf("%s: Done not closed", l.spec.Name)
	}
	if got := l.Lost(); got != wantLost {
		t.Errorf("%s: Lost() = %v, want %v", l.spec.Name, got, wantLost)
	}
	sp := l.spec
	if got := Get(b, sp.Key, sp.Owner, sp.Role); got == l {
		t.Errorf("%s: Get still returns the ended lease", sp.Name)
	}
	for _, x := range Find(b, sp.Key, sp.Owner, sp.Role) {
		if x == l {
			t.Errorf("%s: Find still returns the ended lease", sp.Name)
		}
	}
	if got := ByID(b, sp.Key, sp.Owner, sp.Role, sp.ID); got == l {
		t.Errorf("%s: ByID still returns the ended lease", sp.Name)
	}
}

func assertActive(t *testing.T, b backend.Backend, l *Lease) {
	t.Helper()
	if isDone(l) {
		t.Fatalf("%s: Done closed (Lost() = %v), want the lease active", l.spec.Name, l.Lost())
	}
	if l.Lost() {
		t.Fatalf("%s: Lost() = true on an active lease", l.spec.Name)
	}
	sp := l.spec
	if got := Get(b, sp.Key, sp.Owner, sp.Role); got != l {
		t.Errorf("%s: Get returns %p, want the active lease %p", sp.Name, got, l)
	}
}

// checkRenewalGaps checks that each lease of keys was renewed at least
// rounds times, the first renewal no later than TTL/3 after sent and no
// earlier than TTL/6, and each later one between TTL/6 and TTL/3 after the
// one before: on time, and not early by more than the batching window.
func checkRenewalGaps(t *testing.T, f *fakeBackend, keys []string, sent []time.Time, ttl time.Duration, rounds int) {
	t.Helper()
	interval, early := ttl/3, ttl/6
	bad := 0
	for i, k := range keys {
		rs := f.renewedAt(k)
		if len(rs) < rounds {
			t.Errorf("%s: renewed %d times, want at least %d", k, len(rs), rounds)
			bad++
		}
		prev := sent[i]
		for _, r := range rs {
			if gap := r.Sub(prev); gap > interval || gap < interval-early {
				t.Errorf("%s: renewed %v after the previous renewal, want in [%v, %v]", k, gap, interval-early, interval)
				bad++
				break
			}
			prev = r
		}
		if bad > 10 {
			t.Fatalf("too many errors")
		}
	}
}

// --- 1. Batching -----------------------------------------------------------

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

// --- 2. Fixed leases -------------------------------------------------------

// TestFixedLeaseExpires: a fixed lease is never renewed and is lost at its
// deadline, leaving the index; its Initial is ignored.
func TestFixedLeaseExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 2 * time.Second
		t0 := time.Now()
		spec := fixed("fixed:1", ttl)
		spec.Initial = 500 * time.Millisecond // only for watchdog leases
		l := h.start(f, spec, t0)
		if got := l.Deadline(); !got.Equal(t0.Add(ttl)) {
			t.Errorf("Deadline = t0+%v, want t0+%v", got.Sub(t0), ttl)
		}
		if l.Token() != 7 || l.ID() != "fixed:1#1" || l.Owner() != "owner" || l.s != sched(f) {
			t.Errorf("accessors: token %d id %q owner %q", l.Token(), l.ID(), l.Owner())
		}
		if got := Find(f, "fixed:1", "owner", "x"); len(got) != 1 || got[0] != l {
			t.Fatalf("Find = %v, want the lease", got)
		}

		sleepUntil(t0.Add(ttl - time.Millisecond))
		assertActive(t, f, l)
		sleepUntil(t0.Add(ttl))
		assertEnded(t, f, l, true)
		if c := f.numCalls(); c != 0 {
			t.Errorf("fixed lease renewed: %d calls", c)
		}
		if got := Find(f, "fixed:1", "owner", "x"); len(got) != 0 {
			t.Errorf("Find after loss = %v", got)
		}
		if leases, _ := Stats(f); leases != 0 {
			t.Errorf("Stats leases = %d after loss", leases)
		}
		// Releasing a lost lease forgets it; it stays lost.
		l.Release()
		if !l.Lost() {
			t.Errorf("Release turned a lost lease into a released one")
		}
		sleepUntil(t0.Add(ttl + IdleRetire))
		if registered(f) != nil {
			t.Errorf("scheduler still registered after its only lease expired")
		}
	})
}

// --- 3. Failed renewals ----------------------------------------------------

// TestRenewalErrorsRetryUntilDeadline: renewals that fail are retried every
// TTL/10 (here), and the lease is lost exactly at its deadline.
func TestRenewalErrorsRetryUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("fail:1", ttl), t0)
		f.setErr(errUnavailable)

		sleepUntil(t0.Add(ttl - time.Millisecond))
		assertActive(t, f, l)
		sleepUntil(t0.Add(ttl))
		assertEnded(t, f, l, true)

		ts := f.callsOf("fail:1")
		if len(ts) < 3 {
			t.Fatalf("%d renewal attempts, want retries", len(ts))
		}
		if ts[0].Sub(t0) != ttl/3 {
			t.Errorf("first attempt at t0+%v, want t0+%v", ts[0].Sub(t0), ttl/3)
		}
		retry := ttl / 10
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap != retry {
				t.Errorf("retry %d came %v after the previous attempt, want %v", i, gap, retry)
			}
		}
		if last := ts[len(ts)-1]; !last.Before(t0.Add(ttl)) || last.Before(t0.Add(ttl-retry)) {
			t.Errorf("last attempt at t0+%v, want within the last retry interval before the deadline", last.Sub(t0))
		}
		n := len(ts)
		sleepUntil(t0.Add(3 * ttl))
		if got := f.numCalls(); got != n {
			t.Errorf("%d more calls after the loss", got-n)
		}
	})
}

// TestRenewalTransientErrorRecovers: after two failed attempts a renewal
// succeeds; the lease stays and is back to renewing every TTL/3.
func TestRenewalTransientErrorRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("flaky:1", ttl), t0)
		f.failNextCalls(2)
		sleepUntil(t0.Add(4 * ttl))
		assertActive(t, f, l)
		ts := f.callsOf("flaky:1")
		want := []time.Duration{1000, 1300, 1600, 2600, 3600} // ms after t0
		for i, w := range want {
			if i >= len(ts) {
				t.Fatalf("only %d calls", len(ts))
			}
			if got := ts[i].Sub(t0); got != w*time.Millisecond {
				t.Errorf("call %d at t0+%v, want t0+%v", i, got, w*time.Millisecond)
			}
		}
		if got, want := l.Deadline(), ts[len(ts)-1].Add(ttl); !got.Equal(want) {
			t.Errorf("Deadline = last renewal + %v, want + %v", got.Sub(ts[len(ts)-1]), ttl)
		}
	})
}

// TestMalformedReplyIsRetried: a reply that is not one integer per lease
// is a failed renewal, not a loss.
func TestMalformedReplyIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("odd:1", ttl), t0)
		// w answers renewals with an empty array, which backend.Ints
		// rejects as an unexpected reply.
		w := &shortReply{fakeBackend: f}
		spec := watchdog("odd:3", ttl)
		f.acquire(spec.Key, t0, ttl)
		l3 := Start(w, spec, t0)
		h.leases = append(h.leases, l3)

		sleepUntil(t0.Add(ttl/3 + 100*time.Millisecond))
		assertActive(t, f, l)
		assertActive(t, w, l3)
		if _, next := queued(l3); next.Sub(t0) != ttl/3+ttl/10 {
			t.Errorf("after a malformed reply, next look at t0+%v, want a retry at t0+%v", next.Sub(t0), ttl/3+ttl/10)
		}
		sleepUntil(t0.Add(ttl))
		assertEnded(t, w, l3, true)
		assertActive(t, f, l)
	})
}

// shortReply answers renewals with an empty array.
type shortReply struct{ *fakeBackend }

func (s *shortReply) Eval(ctx context.Context, sc *backend.Script, ks []string, args ...any) (any, error) {
	if _, err := s.fakeBackend.Eval(ctx, sc, ks, args...); err != nil {
		return nil, err
	}
	return []any{}, nil
}

// TestRenewalGoneLosesAtOnce: a renewal that reports the hold gone loses
// the lease at once, while the other leases of the batch stay.
func TestRenewalGoneLosesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		gone := h.start(f, watchdog("gone:1", ttl), t0)
		kept := h.start(f, watchdog("gone:2", ttl), t0)
		sleepUntil(t0.Add(ttl/6 + time.Millisecond))
		f.drop("gone:1")

		sleepUntil(t0.Add(ttl/3 - time.Millisecond))
		assertActive(t, f, gone)
		sleepUntil(t0.Add(ttl / 3))
		assertEnded(t, f, gone, true)
		assertActive(t, f, kept)
		if c := f.callLog(); len(c) != 1 || len(c[0].holds) != 2 {
			t.Fatalf("calls %+v, want one call renewing both", c)
		}
		sleepUntil(t0.Add(2 * ttl))
		if ts := f.callsOf("gone:1"); len(ts) != 1 {
			t.Errorf("the lost lease was renewed %d times, want once", len(ts))
		}
		assertActive(t, f, kept)
	})
}

// TestRenewalErrClosedLosesAtOnce: a renewal failing with ErrClosed (even
// wrapped) loses the lease at once, with no retry.
func TestRenewalErrClosedLosesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("closed:1", ttl), t0)
		f.setErr(fmt.Errorf("adapter: %w", dsync.ErrClosed))
		sleepUntil(t0.Add(ttl/3 - time.Millisecond))
		assertActive(t, f, l)
		sleepUntil(t0.Add(ttl / 3))
		assertEnded(t, f, l, true)
		sleepUntil(t0.Add(2 * ttl))
		if c := f.numCalls(); c != 1 {
			t.Errorf("%d calls, want 1 (no retry after ErrClosed)", c)
		}
	})
}

// --- 4. Retirement ---------------------------------------------------------

// TestRetireAfterRelease: once the last lease is released the scheduler
// leaves the registry within IdleRetire, no goroutine of it is left, and a
// new Start works on a fresh scheduler.
func TestRetireAfterRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 30 * time.Second // the timer is armed 10s ahead
		t0 := time.Now()
		l1 := h.start(f, watchdog("retire:1", ttl), t0)
		l2 := h.start(f, watchdog("retire:2", ttl), t0)
		s := registered(f)
		if s == nil {
			t.Fatal("no scheduler registered")
		}
		sleepUntil(t0.Add(ttl/3 + time.Second)) // one round done
		if c := f.numCalls(); c != 1 {
			t.Fatalf("%d calls, want 1", c)
		}
		l1.Release()
		assertEnded(t, f, l1, false)
		l1.Release() // idempotent
		if leases, _ := Stats(f); leases != 1 {
			t.Errorf("Stats leases = %d, want 1", leases)
		}
		released := time.Now()
		l2.Release()
		assertEnded(t, f, l2, false)
		sleepUntil(released.Add(IdleRetire))
		if registered(f) != nil {
			t.Fatalf("scheduler still registered %v after its last lease was released", IdleRetire)
		}
		if n := schedulerGoroutines(); n != 0 {
			t.Errorf("%d scheduler goroutines left", n)
		}
		if leases, calls := Stats(f); leases != 0 || calls != 0 {
			t.Errorf("Stats of a retired scheduler = %d, %d", leases, calls)
		}
		n := f.numCalls()
		sleepUntil(t0.Add(3 * ttl))
		if got := f.numCalls(); got != n {
			t.Errorf("%d calls after retirement", got-n)
		}

		// A new Start works.
		t1 := time.Now()
		l3 := h.start(f, watchdog("retire:3", ttl), t1)
		if s3 := registered(f); s3 == nil || s3 == s || l3.s != s3 {
			t.Fatalf("new Start did not make a new scheduler")
		}
		sleepUntil(t1.Add(ttl/3 + time.Millisecond))
		if ts := f.callsOf("retire:3"); len(ts) != 1 || ts[0].Sub(t1) != ttl/3 {
			t.Errorf("new lease renewed at %v, want once at t1+%v", ts, ttl/3)
		}
		assertActive(t, f, l3)
	})
}

// TestRetireWhileRenewalInFlight: releasing the last lease while its
// renewal is in flight retires the scheduler within IdleRetire; the
// renewal's return changes nothing.
func TestRetireWhileRenewalInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("inflight:1", ttl), t0)
		open := f.block()
		sleepUntil(t0.Add(ttl / 3))
		if f.inFlight() != 1 {
			t.Fatalf("renewal not in flight")
		}
		l.Release()
		assertEnded(t, f, l, false)
		sleepUntil(time.Now().Add(IdleRetire))
		if registered(f) != nil {
			t.Errorf("scheduler still registered %v after its last lease was released", IdleRetire)
		}
		open()
		synctest.Wait()
		if n := schedulerGoroutines(); n != 0 {
			t.Errorf("%d scheduler goroutines left", n)
		}
		if l.Lost() {
			t.Errorf("released lease became lost")
		}
		sleepUntil(t0.Add(3 * ttl))
		if c := f.numCalls(); c != 1 {
			t.Errorf("%d calls, want 1", c)
		}
	})
}

// TestRetireAfterLoss: a scheduler whose last lease was lost (and, since a
// lost owner's hold leaves the index, never released) retires too. The
// registry doc: "forgets them when they fall idle"; the package doc: "an
// idle backend costs nothing".
func TestRetireAfterLoss(t *testing.T) {
	const ttl = 3 * time.Second
	cases := []struct {
		name string
		lose func(f *fakeBackend, l *Lease, t0 time.Time)
	}{
		{"expired", func(f *fakeBackend, l *Lease, t0 time.Time) {
			f.setErr(errUnavailable)
			sleepUntil(t0.Add(ttl))
		}},
		{"gone", func(f *fakeBackend, l *Lease, t0 time.Time) {
			f.drop(l.spec.Key)
			sleepUntil(t0.Add(ttl / 3))
		}},
		{"closed", func(f *fakeBackend, l *Lease, t0 time.Time) {
			f.setErr(dsync.ErrClosed)
			sleepUntil(t0.Add(ttl / 3))
		}},
		{"kept after gone", func(f *fakeBackend, l *Lease, t0 time.Time) {
			l.BeginRelease()
			f.drop(l.spec.Key)
			sleepUntil(t0.Add(ttl / 3))
			l.Settle(1, 1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				f := h.fake()
				t0 := time.Now()
				l := h.start(f, watchdog("retire-lost:1", ttl), t0)
				c.lose(f, l, t0)
				assertEnded(t, f, l, true)
				sleepUntil(time.Now().Add(IdleRetire))
				if registered(f) != nil {
					t.Errorf("scheduler still registered %v after its last lease was lost (%s)", IdleRetire, c.name)
				}
				if n := schedulerGoroutines(); n != 0 {
					t.Errorf("%d scheduler goroutines left", n)
				}
			})
		})
	}
}

// --- 5. Extend -------------------------------------------------------------

// TestExtendQueued: Extend moves a queued lease's deadline and next
// renewal, and reorders the queue: another lease that is now due first is
// renewed on time. An older acquisition does not move the deadline back.
func TestExtendQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 30 * time.Second
		interval := ttl / 3
		t0 := time.Now()
		a := h.start(f, watchdog("extend:a", ttl), t0)                    // due t0+10s
		b := h.start(f, watchdog("extend:b", ttl), t0.Add(4*time.Second)) // due t0+14s
		sleepUntil(t0.Add(9 * time.Second))
		t1 := time.Now()
		f.acquire("extend:a", t1, ttl)
		a.Extend(t1, ttl) // a now due t0+19s, after b
		if got := a.Deadline(); !got.Equal(t1.Add(ttl)) {
			t.Errorf("Deadline = t0+%v, want t0+%v", got.Sub(t0), t1.Add(ttl).Sub(t0))
		}
		a.Extend(t0, ttl) // older: ignored
		if got := a.Deadline(); !got.Equal(t1.Add(ttl)) {
			t.Errorf("an older Extend moved the deadline to t0+%v", got.Sub(t0))
		}
		if n, next := queued(a); n != 1 || !next.Equal(t1.Add(interval)) {
			t.Errorf("queued %d times, next t0+%v; want once, t0+%v", n, next.Sub(t0), t1.Add(interval).Sub(t0))
		}
		sleepUntil(t1.Add(interval))
		if ts := f.renewedAt("extend:a"); len(ts) != 1 || ts[0].After(t1.Add(interval)) || ts[0].Before(t1.Add(interval-ttl/6)) {
			t.Errorf("extended lease renewed at %v, want once, by t1+TTL/3", ts)
		}
		if ts := f.renewedAt("extend:b"); len(ts) == 0 || ts[0].After(t0.Add(4*time.Second+interval)) {
			t.Errorf("the other lease renewed at %v, want by t0+%v", ts, 4*time.Second+interval)
		}
		assertActive(t, f, a)
		assertActive(t, f, b)
	})
}

// TestExtendDuringInflightRenewal: Extend while the lease's renewal is in
// flight moves its deadline; when the renewal returns, the lease is queued
// once, not lost, and renewed again in time.
func TestExtendDuringInflightRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		interval := ttl / 3
		t0 := time.Now()
		l := h.start(f, watchdog("extend:f", ttl), t0)
		open := f.block()
		sleepUntil(t0.Add(interval)) // renewal sent at t0+1s, blocked
		if f.inFlight() != 1 {
			t.Fatal("renewal not in flight")
		}
		sleepUntil(t0.Add(interval + 500*time.Millisecond))
		t1 := time.Now()
		f.acquire("extend:f", t1, ttl)
		l.Extend(t1, ttl)
		if got := l.Deadline(); !got.Equal(t1.Add(ttl)) {
			t.Errorf("Deadline after Extend = t0+%v, want t0+%v", got.Sub(t0), t1.Add(ttl).Sub(t0))
		}
		if n, _ := queued(l); n != 0 {
			t.Errorf("in-flight lease queued %d times by Extend", n)
		}
		sleepUntil(t1.Add(100 * time.Millisecond))
		open()
		synctest.Wait()
		assertActive(t, f, l)
		n, next := queued(l)
		if n != 1 {
			t.Fatalf("after the renewal returned, queued %d times, want 1", n)
		}
		sent := t0.Add(interval)
		if got := l.Deadline(); got.Before(sent.Add(ttl)) {
			t.Errorf("Deadline = t0+%v, before the renewal's sent+TTL (t0+%v)", got.Sub(t0), sent.Add(ttl).Sub(t0))
		}
		if next.After(t1.Add(interval)) || next.Before(sent.Add(interval)) {
			t.Errorf("next renewal at t0+%v, want in [t0+%v, t0+%v]", next.Sub(t0), sent.Add(interval).Sub(t0), t1.Add(interval).Sub(t0))
		}
		// Renewed again at next, and on every interval after.
		sleepUntil(next.Add(4 * interval))
		ts := f.callsOf("extend:f")
		if len(ts) < 5 || !ts[1].Equal(next) {
			t.Fatalf("renewals at %v, want the second at t0+%v and one per interval after", ts, next.Sub(t0))
		}
		for i := 2; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap != interval {
				t.Errorf("renewal %d came %v after the previous, want %v", i, gap, interval)
			}
		}
		assertActive(t, f, l)
	})
}

// TestExtendDuringInflightRenewalKeepsLaterDeadline: a renewal sent before
// a re-acquisition must not move the deadline that re-acquisition set
// back: both reset the server's expiry, so the hold is known valid until
// the later of the two, and Extend itself never moves a deadline back.
func TestExtendDuringInflightRenewalKeepsLaterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("extend:m", ttl), t0)
		open := f.block()
		sleepUntil(t0.Add(ttl / 3))
		sleepUntil(t0.Add(ttl/3 + 500*time.Millisecond))
		t1 := time.Now()
		f.acquire("extend:m", t1, ttl)
		l.Extend(t1, ttl)
		extended := l.Deadline()
		open()
		synctest.Wait()
		if got := l.Deadline(); got.Before(extended) {
			t.Errorf("the in-flight renewal's success moved the deadline back from t0+%v (set by Extend) to t0+%v",
				extended.Sub(t0), got.Sub(t0))
		}
	})
}

// TestExtendDuringStuckRenewal: a renewal stuck until the lease's old
// deadline fails then, but a re-acquisition meanwhile keeps the lease: it
// is retried, not lost at the old deadline.
func TestExtendDuringStuckRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("extend:s", ttl), t0)
		f.setStuck(scriptA)
		sleepUntil(t0.Add(ttl / 3))
		sleepUntil(t0.Add(2 * time.Second))
		t1 := time.Now()
		f.acquire("extend:s", t1, ttl)
		l.Extend(t1, ttl)
		sleepUntil(t0.Add(ttl)) // the stuck call's context ends
		assertActive(t, f, l)
		f.unblock()
		sleepUntil(t0.Add(ttl + ttl/10))
		ts := f.callsOf("extend:s")
		if len(ts) != 2 || !ts[1].Equal(t0.Add(ttl+ttl/10)) {
			t.Errorf("calls at %v, want a retry TTL/10 after the stuck call failed", ts)
		}
		sleepUntil(t1.Add(2 * ttl))
		assertActive(t, f, l)
	})
}

// --- 6. Loss crossing a release --------------------------------------------

// TestReleaseCrossingGoneRenewal: a renewal that finds the hold gone while
// a final release is under way is not a loss; Release ends the lease as
// released.
func TestReleaseCrossingGoneRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("cross:1", ttl), t0)
		open := f.block()
		sleepUntil(t0.Add(ttl / 3)) // renewal in flight
		l.BeginRelease()
		f.drop("cross:1") // the release deletes the hold first
		open()
		synctest.Wait()
		if isDone(l) || l.Lost() {
			t.Fatalf("renewal crossing a release reported a loss (done %v, lost %v)", isDone(l), l.Lost())
		}
		l.Release()
		assertEnded(t, f, l, false)
		sleepUntil(t0.Add(3 * ttl))
		if l.Lost() {
			t.Errorf("released lease became lost")
		}
		if c := f.numCalls(); c != 1 {
			t.Errorf("%d calls, want 1", c)
		}
	})
}

// TestKeptAfterGoneRenewalLoses: if the release turns out partial (Kept)
// after a renewal found the hold gone, the lease is lost then.
func TestKeptAfterGoneRenewalLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("kept:gone", ttl), t0)
		h.reenter(f, l, 2)
		other := h.start(f, watchdog("kept:other", ttl), t0)
		l.BeginRelease()
		l.BeginRelease() // two releases under way
		f.drop("kept:gone")
		sleepUntil(t0.Add(ttl / 3))
		if isDone(l) {
			t.Fatalf("lost while releases are under way")
		}
		l.Settle(1, 1)
		if isDone(l) {
			t.Fatalf("lost while a release is still under way")
		}
		l.Settle(1, 1)
		assertEnded(t, f, l, true)
		assertActive(t, f, other)
	})
}

// TestKeptAfterRenewedStaysActive: a partial release crossing a
// successful renewal leaves the lease active and renewing.
func TestKeptAfterRenewedStaysActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("kept:ok", ttl), t0)
		h.reenter(f, l, 1)
		l.BeginRelease()
		sleepUntil(t0.Add(ttl / 3))
		if ts := f.renewedAt("kept:ok"); len(ts) != 1 {
			t.Fatalf("renewed %d times, want 1", len(ts))
		}
		l.Settle(1, 1)
		assertActive(t, f, l)
		sleepUntil(t0.Add(4 * ttl / 3))
		if ts := f.renewedAt("kept:ok"); len(ts) != 4 {
			t.Errorf("renewed %d times by t0+4TTL/3, want 4", len(ts))
		}
		assertActive(t, f, l)
		// A later loss is reported normally: nothing is left releasing.
		f.drop("kept:ok")
		sleepUntil(t0.Add(5 * ttl / 3))
		assertEnded(t, f, l, true)
	})
}

// --- 7. The index ----------------------------------------------------------

// TestIndexPerSession: each scheduler indexes its own leases: holds of one
// key, owner and role kept through several backend values are each found
// through their own, by key, owner, role and id.
func TestIndexPerSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		b1, b2, none := h.fake(), h.fake(), h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		spec := func(id string) Spec {
			s := watchdog("index:k", ttl)
			s.ID = id
			return s
		}
		l1 := h.start(b1, spec("id1"), t0)
		l2 := h.start(b2, spec("id2"), t0)
		other := spec("id3")
		other.Owner = "someone"
		l3 := h.start(b1, other, t0)

		if Get(b1, "index:k", "owner", "x") != l1 || Get(b2, "index:k", "owner", "x") != l2 {
			t.Errorf("Get does not return the backend's own lease")
		}
		if Get(b1, "index:k", "someone", "x") != l3 || Get(b1, "index:k", "owner", "r") != nil {
			t.Errorf("Get confuses owners or roles")
		}
		if got := Get(none, "index:k", "owner", "x"); got != nil {
			t.Errorf("Get(none) = %s, want nil", got.ID())
		}
		if ByID(b1, "index:k", "owner", "x", "id1") != l1 || ByID(b1, "index:k", "owner", "x", "id2") != nil ||
			ByID(b1, "index:k", "owner", "x", "") != nil || ByID(b1, "index:k", "owner", "r", "id1") != nil {
			t.Errorf("ByID finds a lease it should not, or misses one")
		}
		if got := sched(b1).Other("index:k", "owner", "x"); got != l3 {
			t.Errorf("Other = %v, want the other owner's lease", got)
		}
		if !sched(b1).Holds("index:k", "owner", "x") || sched(none).Holds("index:k", "owner", "x") {
			t.Errorf("Holds is wrong")
		}

		// Ending one leaves the others.
		l2.Release()
		if Get(b2, "index:k", "owner", "x") != nil {
			t.Errorf("the released lease is still found")
		}
		sleepUntil(t0.Add(ttl/3 + 10*time.Millisecond))
		if b1.numCalls() != 1 {
			t.Errorf("backend renewed %d times, want 1", b1.numCalls())
		}
		if b2.numCalls() != 0 {
			t.Errorf("released lease renewed")
		}
		l1.Release()
		l3.Release()
	})
}

// TestStartReplacesSameBackend: a Start of the same key, owner and role on
// the same backend ends the earlier lease as released, not lost.
func TestStartReplacesSameBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		b1, b2 := h.fake(), h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		s := watchdog("replace:k", ttl)
		s.ID = "old"
		old := h.start(b1, s, t0)
		s.ID = "elsewhere"
		elsewhere := h.start(b2, s, t0)
		time.Sleep(100 * time.Millisecond)
		s.ID = "new"
		t1 := time.Now()
		nu := h.start(b1, s, t1)

		assertEnded(t, b1, old, false)
		assertActive(t, b1, nu)
		assertActive(t, b2, elsewhere)
		if got := Find(b1, "replace:k", "owner", "x"); len(got) != 1 || got[0] != nu {
			t.Errorf("Find(b1) = %d leases, want the new one", len(got))
		}
		if got := Find(b2, "replace:k", "owner", "x"); len(got) != 1 || got[0] != elsewhere {
			t.Errorf("Find(b2) = %d leases, want the one kept there", len(got))
		}
		if leases, _ := Stats(b1); leases != 1 {
			t.Errorf("Stats(b1) leases = %d, want 1", leases)
		}
		old.Release() // harmless
		if leases, _ := Stats(b1); leases != 1 {
			t.Errorf("Stats(b1) leases = %d after releasing the replaced lease, want 1", leases)
		}
		// Only the new lease is renewed on b1, once, at t1+TTL/3 or up to
		// TTL/6 earlier (riding along in the round the old lease armed).
		sleepUntil(t1.Add(ttl/3 + time.Millisecond))
		calls := b1.callLog()
		if len(calls) != 1 || len(calls[0].holds) != 1 {
			t.Fatalf("b1 calls %+v, want one renewing one lease", calls)
		}
		if at := calls[0].at; at.After(t1.Add(ttl/3)) || at.Before(t1.Add(ttl/3-ttl/6)) {
			t.Errorf("b1 renewal at t1+%v, want in [t1+%v, t1+%v]", at.Sub(t1), ttl/3-ttl/6, ttl/3)
		}
		if got := nu.Deadline(); !got.Equal(calls[0].at.Add(ttl)) {
			t.Errorf("new lease's deadline = renewal+%v, want +%v", got.Sub(calls[0].at), ttl)
		}
		if old.Lost() {
			t.Errorf("replaced lease is lost")
		}
	})
}

// --- 8. Initial lease ------------------------------------------------------

// TestInitialLease: a lease acquired on a short Initial lease has deadline
// sent+Initial and is first renewed at Initial/3, to the full TTL.
func TestInitialLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		const initial = 600 * time.Millisecond
		t0 := time.Now()
		spec := watchdog("initial:1", ttl)
		spec.Initial = initial
		l := h.start(f, spec, t0)
		if got := l.Deadline(); !got.Equal(t0.Add(initial)) {
			t.Errorf("Deadline = t0+%v, want t0+%v", got.Sub(t0), initial)
		}
		sleepUntil(t0.Add(initial/3 - time.Millisecond))
		if c := f.numCalls(); c != 0 {
			t.Fatalf("renewed before Initial/3")
		}
		sleepUntil(t0.Add(initial / 3))
		ts := f.renewedAt("initial:1")
		if len(ts) != 1 {
			t.Fatalf("not renewed at Initial/3 (t0+%v)", initial/3)
		}
		r1 := ts[0]
		if got := l.Deadline(); !got.Equal(r1.Add(ttl)) {
			t.Errorf("Deadline after the first renewal = renewal+%v, want +%v", got.Sub(r1), ttl)
		}
		sleepUntil(r1.Add(ttl/3 - time.Millisecond))
		if n := len(f.renewedAt("initial:1")); n != 1 {
			t.Errorf("renewed again before TTL/3")
		}
		sleepUntil(r1.Add(ttl / 3))
		if ts := f.renewedAt("initial:1"); len(ts) != 2 || !ts[1].Equal(r1.Add(ttl/3)) {
			t.Errorf("renewals at %v, want the second at first+TTL/3", ts)
		}
		assertActive(t, f, l)

		// An Initial not shorter than TTL is ignored.
		spec2 := watchdog("initial:2", ttl)
		spec2.Initial = 2 * ttl
		t1 := time.Now()
		l2 := h.start(f, spec2, t1)
		if got := l2.Deadline(); !got.Equal(t1.Add(ttl)) {
			t.Errorf("Initial > TTL: Deadline = t1+%v, want t1+%v", got.Sub(t1), ttl)
		}
	})
}

// TestInitialLeaseLostAtInitialDeadline: a lease on its short Initial lease
// whose renewals fail is lost at sent+Initial, not sent+TTL.
func TestInitialLeaseLostAtInitialDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		const initial = 600 * time.Millisecond
		t0 := time.Now()
		spec := watchdog("initial:fail", ttl)
		spec.Initial = initial
		l := h.start(f, spec, t0)
		f.setErr(errUnavailable)
		sleepUntil(t0.Add(initial - time.Millisecond))
		assertActive(t, f, l)
		sleepUntil(t0.Add(initial))
		assertEnded(t, f, l, true)
	})
}

// --- 9. Stuck calls --------------------------------------------------------

// TestStuckRenewalDoesNotDelayOthers: a renewal call that hangs until its
// context's deadline delays neither another group's renewals nor the loss
// of its own leases, reported at their deadline.
func TestStuckRenewalDoesNotDelayOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		interval := ttl / 3
		t0 := time.Now()
		stuck := h.start(f, watchdog("stuck:a", ttl), t0)
		stuck2 := h.start(f, watchdog("stuck:a2", ttl), t0.Add(200*time.Millisecond))
		specB := watchdog("stuck:b", ttl)
		specB.Renew = scriptB
		fine := h.start(f, specB, t0)
		f.setStuck(scriptA)

		sleepUntil(t0.Add(ttl - time.Millisecond))
		assertActive(t, f, stuck)
		if ts := f.renewedAt("stuck:b"); len(ts) != 2 || !ts[0].Equal(t0.Add(interval)) || !ts[1].Equal(t0.Add(2*interval)) {
			t.Errorf("other group renewed at %v, want at t0+1s and t0+2s", ts)
		}
		sleepUntil(t0.Add(ttl))
		assertEnded(t, f, stuck, true)
		// stuck2 rode in the same call; its own deadline is later.
		if stuck2.Deadline().After(t0.Add(ttl)) {
			assertActive(t, f, stuck2)
		}
		sleepUntil(stuck2.Deadline())
		assertEnded(t, f, stuck2, true)
		sleepUntil(t0.Add(3 * ttl))
		assertActive(t, f, fine)
		if ts := f.renewedAt("stuck:b"); len(ts) != 9 {
			t.Errorf("other group renewed %d times by t0+3TTL, want 9", len(ts))
		}
	})
}

// TestStuckCallsDoNotDelayLossBeyondDeadline: with MaxRenewing calls stuck
// (a partitioned server answers none), a lease of a shorter TTL in another
// group must still be lost by its deadline: the package promises that the
// client gives up no later than the server expires the key.
func TestStuckCallsDoNotDelayLossBeyondDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const long = 30 * time.Second
		t0 := time.Now()
		for i := range MaxRenewing {
			s := backend.NewScript(fmt.Sprintf("-- renew %d", i))
			spec := watchdog(fmt.Sprintf("starve:long%d", i), long)
			spec.Renew = s
			h.start(f, spec, t0)
			f.setStuck(s)
		}
		sleepUntil(t0.Add(long / 3)) // MaxRenewing calls stuck until t0+30s
		if got := f.inFlight(); got != MaxRenewing {
			t.Fatalf("%d calls in flight, want %d", got, MaxRenewing)
		}
		const short = 3 * time.Second
		t1 := t0.Add(long/3 + 500*time.Millisecond)
		sleepUntil(t1)
		spec := watchdog("starve:short", short)
		spec.Renew = scriptB
		l := h.start(f, spec, t1)
		f.setStuck(scriptB) // the server answers nothing
		lost := make(chan time.Time, 1)
		go func() {
			<-l.Done()
			lost <- time.Now()
		}()
		deadline := t1.Add(short)
		sleepUntil(deadline)
		if !isDone(l) {
			t.Errorf("short lease not lost at its deadline t0+%v, when the server expired its key (renewal attempts by then: %d)",
				deadline.Sub(t0), len(f.callsOf("starve:short")))
		}
		sleepUntil(t0.Add(2 * long))
		if lostAt := <-lost; lostAt.After(deadline) {
			t.Logf("short lease lost at t0+%v, %v after its deadline", lostAt.Sub(t0), lostAt.Sub(deadline))
		}
	})
}

// TestGoroutinesBounded: however many groups are due, at most MaxRenewing
// renewal calls are in flight.
func TestGoroutinesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		for i := range 10 {
			s := backend.NewScript(fmt.Sprintf("-- bounded %d", i))
			spec := watchdog(fmt.Sprintf("bounded:%d", i), ttl)
			spec.Renew = s
			h.start(f, spec, t0)
		}
		open := f.block()
		sleepUntil(t0.Add(ttl / 3))
		if got := f.inFlight(); got != MaxRenewing {
			t.Errorf("%d calls in flight, want MaxRenewing = %d", got, MaxRenewing)
		}
		open()
		synctest.Wait()
		if got := f.numCalls(); got != 10 {
			t.Errorf("%d calls, want 10", got)
		}
		for _, l := range h.leases {
			assertActive(t, f, l)
		}
	})
}

// TestNoLeakAfterBubble checks with goleak, outside any bubble, that the
// tests above leave no goroutine behind.
func TestNoLeakAfterBubble(t *testing.T) {
	goleak.VerifyNone(t)
}

// TestTakenBeforeStartStartsLost: a hold that LoseHold took before any
// lease kept it (a hand-off ForceUnlock took before its waiter accepted
// it) starts lost when the waiter starts keeping it; the hold's id is
// forgotten once used, and after takenMemory.
func TestTakenBeforeStartStartsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		sched(f).LoseHold("taken:1", "taken:1#1", "taken by ForceUnlock", true)
		l := h.start(f, watchdog("taken:1", ttl), time.Now())
		assertEnded(t, f, l, true)

		// Once used, the id is forgotten: the same id kept again is not lost.
		again := h.start(f, watchdog("taken:1", ttl), time.Now())
		assertActive(t, f, again)

		sched(f).LoseHold("taken:2", "taken:2#1", "taken by ForceUnlock", true)
		time.Sleep(takenMemory + time.Second)
		late := h.start(f, watchdog("taken:2", ttl), time.Now())
		assertActive(t, f, late)
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

// --- 9. Pending hand-offs ----------------------------------------------

// TestPendingHoldIsQueuedBehindThenKept: a hold handed to a waiter of the
// session is pending: another owner's waiter queues behind it (Other,
// Enqueue); the waiter's Keep turns that very record into its lease, with
// the queued entry, which the lease's release takes.
func TestPendingHoldIsQueuedBehindThenKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		s := sched(f)
		s.Pending("pend:1", "owner", "x", "pend:1#1", "wake", 1, 2*time.Second)
		if s.Find("pend:1", "owner", "x") != nil || s.Holds("pend:1", "owner", "x") {
			t.Fatal("a pending hold is found as the owner's hold before it keeps it")
		}
		p := s.Other("pend:1", "someone", "x")
		if p == nil {
			t.Fatal("no pending hold to queue behind")
		}
		token, ok := p.Enqueue("hub/w|2000|someone")
		if !ok {
			t.Fatal("Enqueue refused on a pending hold")
		}
		if token != 1 {
			t.Errorf("Enqueue behind the pending hold returned token %d, want the grant's, 1", token)
		}
		l := h.start(f, watchdog("pend:1", 3*time.Second), time.Now())
		if l != p {
			t.Fatalf("Keep made a new lease, want the pending record taken over")
		}
		assertActive(t, f, l)
		if leases, _ := s.Stats(); leases != 1 {
			t.Errorf("Stats leases = %d, want 1", leases)
		}
		if q, ok := l.TakeQueued(); !ok || len(q) != 1 || q[0] != "hub/w|2000|someone" {
			t.Errorf("TakeQueued = %v, %v; want the entry queued while pending", q, ok)
		}
	})
}

// TestPendingHoldDroppedOrExpired: a pending hold that its waiter gave up
// (DropPending) or that outlived its ttl is no longer queued behind, and
// the waiters queued behind it are woken; ForceUnlock of a pending hold
// makes its lease start lost.
func TestPendingHoldDroppedOrExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		var woken []string
		var mu sync.Mutex
		s := NewScheduler(f, Hooks{Wake: func(channel string, entries []string) {
			mu.Lock()
			woken = append(woken, entries...)
			mu.Unlock()
		}})
		s.Pending("drop:1", "owner", "x", "drop:1#1", "wake", 1, 2*time.Second)
		s.Other("drop:1", "someone", "x").Enqueue("e1")
		s.DropPending("drop:1", "drop:1#1")
		if s.Other("drop:1", "someone", "x") != nil {
			t.Error("a dropped pending hold is still queued behind")
		}
		s.Pending("drop:2", "owner", "x", "drop:2#1", "wake", 1, 2*time.Second)
		s.Other("drop:2", "someone", "x").Enqueue("e2")
		time.Sleep(2 * time.Second)
		if s.Other("drop:2", "someone", "x") != nil {
			t.Error("a pending hold past its ttl is still queued behind")
		}
		mu.Lock()
		if len(woken) != 2 || woken[0] != "e1" || woken[1] != "e2" {
			t.Errorf("woken %v, want e1 then e2", woken)
		}
		mu.Unlock()
		s.Pending("force:1", "owner", "x", "force:1#1", "wake", 1, 2*time.Second)
		s.LoseHold("force:1", "force:1#1", "taken by ForceUnlock", true)
		l := s.Keep(watchdog("force:1", 3*time.Second), time.Now(), 0, 1)
		if !l.Lost() {
			t.Error("a hold ForceUnlock took while pending started active")
		}
		s.Retire()
	})
}
