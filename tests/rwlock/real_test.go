package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

var prefixN struct {
	sync.Mutex
	n int
}

func prefix(t *testing.T) string {
	prefixN.Lock()
	defer prefixN.Unlock()
	prefixN.n++
	return fmt.Sprintf("rw%d_%d", time.Now().UnixNano(), prefixN.n)
}

func key(p, name string) string { return p + ":rwlock:{" + name + "}" }

// commandCalls sums the calls of every command the server ran, scripts'
// inner calls included.
func commandCalls(t *testing.T, srv *testserver.Server) int64 {
	t.Helper()
	v, err := redis.String(srv.Do(context.Background(), "INFO", "commandstats"))
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, line := range strings.Split(v, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, rest, _ := strings.Cut(line, ":calls=")
		n, _, _ := strings.Cut(rest, ",")
		c, _ := strconv.ParseInt(n, 10, 64)
		sum += c
	}
	return sum
}

// keysLeft lists the keys under prefix p that are not a freed write key or
// a fence key with a TTL.
func keysLeft(t *testing.T, srv *testserver.Server, p string) []string {
	t.Helper()
	ctx := context.Background()
	ks, err := redis.Strings(srv.Do(ctx, "KEYS", p+":*"))
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, k := range ks {
		typ, _ := redis.String(srv.Do(ctx, "TYPE", k))
		pttl, _ := redis.Int64(srv.Do(ctx, "PTTL", k))
		v := ""
		if typ == "string" {
			v, _ = redis.String(srv.Do(ctx, "GET", k))
		}
		if tok, err := strconv.ParseInt(strings.TrimSuffix(v, " free"), 10, 64); err == nil && tok > 0 && pttl > 0 {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s (%s %q pttl %dms)", k, typ, v, pttl))
	}
	return bad
}

func state(t *testing.T, ctx context.Context, m *rwlock.RWMutex) rwlock.State {
	t.Helper()
	st, err := m.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func await(t *testing.T, ctx context.Context, m *rwlock.RWMutex, what string, cond func(rwlock.State) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := state(t, ctx, m)
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s; state %+v", what, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// gated holds a backend's script calls back while closed is set, until
// open is closed.
type gated struct {
	backend.Backend
	closed atomic.Bool
	open   chan struct{}
}

func (g *gated) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if g.closed.Load() {
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Backend.Eval(ctx, s, keys, args...)
}

// TestReadReleaseCost: the cost of one read release, in server
// commands, must not grow with the number of readers.
func TestReadReleaseCost(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	cost := func(n int, writer bool) (mid, last int64) {
		p := prefix(t)
		b := srv.NewBackend(t)
		m := rwlock.New(b, "cost", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
		for range n {
			m.RLock()
		}
		var got chan error
		// The waiting writer's heartbeat (an attempt every third of its
		// waiter timeout) must not fall among the commands counted.
		// And the writer's acquisition, which the last release wakes, must
		// not either: its calls wait at the gate until the count is taken.
		gate := &gated{Backend: srv.NewBackend(t), open: make(chan struct{})}
		w := rwlock.New(gate, "cost", rwlock.WithPrefix(p), rwlock.WithLogger(nil), rwlock.WithWaiterTimeout(time.Minute))
		if writer {
			got = make(chan error, 1)
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			t.Cleanup(cancel)
			go func() { got <- w.LockContext(wctx) }()
			await(t, ctx, m, "writer queued", func(s rwlock.State) bool { return s.WaitingWriters == 1 })
		}
		for range n - 1 {
			before := commandCalls(t, srv)
			m.RUnlock()
			mid = commandCalls(t, srv) - before - 1 // INFO itself
		}
		gate.closed.Store(true)
		before := commandCalls(t, srv)
		m.RUnlock()
		last = commandCalls(t, srv) - before - 1
		close(gate.open)
		if writer {
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			w.Unlock()
		}
		return mid, last
	}
	for _, writer := range []bool{false, true} {
		m10, l10 := cost(10, writer)
		m300, l300 := cost(300, writer)
		t.Logf("writer waiting %v: read release costs %d commands with 10 readers, %d with 300; the last %d / %d", writer, m10, m300, l10, l300)
		if m300 > m10+2 || l300 > l10+2 {
			t.Errorf("writer waiting %v: a read release costs %d commands with 300 readers, %d with 10 (last: %d vs %d): O(readers)", writer, m300, m10, l300, l10)
		}
	}
}

// TestNoKeysLeft: after a mixed workload in which every hold is
// released and every waiter gets in or gives up, only the freed write key
// and the fence key (both with a TTL) may be left.
func TestNoKeysLeft(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	open := func(opts ...rwlock.Option) *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), "keys", append([]rwlock.Option{rwlock.WithPrefix(p), rwlock.WithLogger(nil)}, opts...)...)
	}
	w := open()
	o := dsync.WithOwner(ctx)
	if err := w.LockContext(o); err != nil {
		t.Fatal(err)
	}
	if err := w.RLockContext(o); err != nil { // downgrade
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 12 {
		m := open()
		if i%3 == 0 {
			m = open(rwlock.WithReaderPreference())
		}
		wg.Go(func() {
			d := 5 * time.Second
			if i%4 == 0 {
				d = 100 * time.Millisecond // gives up
			}
			wctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			oc := dsync.WithOwner(wctx)
			if i%2 == 0 {
				if err := m.RLockContext(oc); err == nil {
					m.RLockContext(oc)
					time.Sleep(5 * time.Millisecond)
					m.RUnlockContext(oc)
					m.RUnlockContext(oc)
				}
			} else {
				if err := m.LockContext(oc); err == nil {
					m.RLockContext(oc)
					time.Sleep(5 * time.Millisecond)
					m.UnlockContext(oc)
					m.RUnlockContext(oc)
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	if err := w.UnlockContext(o); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := w.RUnlockContext(o); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if ok, err := w.TryLockContext(ctx); !ok || err != nil {
		t.Fatalf("TryLock at the end: %v, %v", ok, err)
	}
	w.Unlock()
	if st := state(t, ctx, w); st.Mode != rwlock.Free || st.WaitingReaders != 0 || st.WaitingWriters != 0 {
		t.Errorf("at the end: %+v", st)
	}
	if bad := keysLeft(t, srv, p); len(bad) > 0 {
		t.Errorf("keys left after everything was released: %v", bad)
	}
}

// spy loses the replies of the next Evals whose script is one of those
// marked: the script runs, the caller never hears (a timeout).
type spy struct {
	backend.Backend
	mu   sync.Mutex
	lose int
}

var errLost = errors.New("reply lost in transit")

func (s *spy) Eval(ctx context.Context, sc *backend.Script, keys []string, args ...any) (any, error) {
	s.mu.Lock()
	lose := s.lose > 0 && len(keys) == 7 // the lock's scripts, not renewals
	if lose {
		s.lose--
	}
	s.mu.Unlock()
	r, err := s.Backend.Eval(ctx, sc, keys, args...)
	if lose && err == nil {
		return nil, errLost
	}
	return r, err
}

func (s *spy) loseNext(n int) {
	s.mu.Lock()
	s.lose = n
	s.mu.Unlock()
}

// TestLostRepliesReadSide: replies lost on read acquire, re-entry,
// partial and final release, try-acquire and a waiter's abandon: counts stay
// exact and nothing is left held.
func TestLostRepliesReadSide(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	sp := &spy{Backend: srv.NewBackend(t)}
	m := rwlock.New(sp, "lost", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
	probe := rwlock.New(srv.NewBackend(t), "lost", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	sp.loseNext(1)
	if err := m.RLockContext(o); err != nil {
		t.Fatalf("RLock with a lost reply: %v", err)
	}
	sp.loseNext(1)
	if err := m.RLockContext(o); err != nil {
		t.Fatalf("re-entering RLock with a lost reply: %v", err)
	}
	if st := state(t, o, m); st.ReadCount != 2 {
		t.Errorf("after 2 RLocks with lost replies: read count %d, want 2", st.ReadCount)
	}
	sp.loseNext(1)
	if err := m.RUnlockContext(o); err != nil {
		t.Errorf("partial RUnlock with a lost reply: %v", err)
	}
	if st := state(t, o, m); st.ReadCount != 1 {
		t.Errorf("after a partial RUnlock with a lost reply: read count %d, want 1", st.ReadCount)
	}
	sp.loseNext(1)
	if ok, err := m.TryRLockContext(o); ok || err == nil {
		t.Errorf("TryRLock with a lost reply: %v, %v; want an error", ok, err)
	}
	if st := state(t, o, m); st.ReadCount != 1 {
		t.Errorf("after a TryRLock with a lost reply: read count %d, want 1 (abandon undoes it)", st.ReadCount)
	}
	sp.loseNext(1)
	if err := m.RUnlockContext(o); err != nil {
		t.Errorf("final RUnlock with a lost reply: %v", err)
	}
	if st := state(t, ctx, probe); st.Mode != rwlock.Free || st.Readers != 0 {
		t.Errorf("after the final RUnlock: %+v", st)
	}
	// A waiter handed the lock whose abandon's reply is lost.
	probe.Lock()
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- m.RLockContext(wctx) }()
	await(t, ctx, probe, "reader waiting", func(s rwlock.State) bool { return s.WaitingReaders == 1 })
	sp.loseNext(1)
	cancel()
	<-got
	probe.Unlock()
	await(t, ctx, probe, "free after the abandoned reader", func(s rwlock.State) bool { return s.Mode == rwlock.Free && s.WaitingReaders == 0 })
	if ok, err := probe.TryLockContext(ctx); !ok || err != nil {
		t.Errorf("TryLock after the abandon: %v, %v", ok, err)
	} else {
		probe.Unlock()
	}
	if bad := keysLeft(t, srv, p); len(bad) > 0 {
		t.Errorf("keys left: %v", bad)
	}
}
