package lease

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// The tests run in synctest bubbles: time is fake, and a renewal that the
// scheduler makes "at t" is recorded by the fake backend at exactly t.
// The harness starts leases on fake backends, each with a scheduler of its
// own, as the core's session does.

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
