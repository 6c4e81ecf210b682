package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// fakeBackend: a server of leases in memory, whose calls the tests log,
// fail, block or leave stuck.

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
