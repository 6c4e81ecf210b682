package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/rwlock"
)

// rwlockTests are the read-write lock's own cases; its write side runs the
// exclusive table.
func (s *suite) rwlockRules() []rule {
	cases := []rule{
		{"RWInvariant", "never a writer with any other holder; readers overlap; counts exact", true, s.testRWInvariant},
		{"RWWriterNotStarved", "with writer preference a waiting writer keeps new readers out", true, s.testRWWriterNotStarved},
		{"RWReaderPreference", "with reader preference readers keep entering while a writer waits", true, s.testRWReaderPreference},
		{"RWReadersWokenTogether", "a write release hands the lock to every waiting reader at once", true, s.testRWReadersWokenTogether},
		{"RWLastReaderHandsOff", "the last read release hands the lock to the waiting writer", false, s.testRWLastReaderHandsOff},
		{"RWDowngradeUpgrade", "a writer may downgrade; a reader asking for write gets ErrUpgrade at once", false, s.testRWDowngradeUpgrade},
		{"RWReentrancy", "reads and writes re-enter per owner, counted exactly; each side unlocks only itself", false, s.testRWReentrancy},
		{"RWReaderLeases", "each read hold has its own lease: an expired reader frees itself, a renewed one stays", false, s.testRWReaderLeases},
		{"RWDeadWaitingWriter", "a waiting writer that stopped beating blocks readers at most the waiter timeout", false, s.testRWDeadWaitingWriter},
		{"RWNoOvertakeAfterExpiry", "a newcomer never takes the lock ahead of a live writer once the write hold it queued behind ran out: TryLock and TryRLock fail and Lock waits its turn", false, s.testRWNoOvertake},
		{"RWReadersFirstAfterExpiredWrite", "readers that waited out a write hold go before the next writer when the hold ran out, as when it was released: ahead of a writer queued behind them and of a newcomer, whose TryLock fails", false, s.testRWReadersFirst},
		{"RWLostSignal", "deleting the lock's keys fires Done and RDone", false, s.testRWLostSignal},
		{"RWGiveUpStorm", "readers and writers that give up leave nothing held or queued", false, s.testRWGiveUpStorm},
		{"RWBadInput", "bad input on the read side is a sentinel error before any I/O", false, s.testRWBadInput},
	}
	return append(cases, s.releaseRules("RWRead", rwReadReleases)...)
}

func (s *suite) rwOpen(t *testing.T, p string, opts ...rwlock.Option) *rwlock.RWMutex {
	return rwlock.New(s.newBackend(t), "rw", append([]rwlock.Option{rwlock.WithPrefix(p)}, opts...)...)
}

func rwState(t *testing.T, ctx context.Context, m *rwlock.RWMutex) rwlock.State {
	t.Helper()
	st, err := m.State(ctx)
	must(t, err, "State")
	return st
}

// awaitRW waits until the lock's state satisfies cond.
func awaitRW(t *testing.T, ctx context.Context, m *rwlock.RWMutex, what string, cond func(rwlock.State) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		st := rwState(t, ctx, m)
		if cond(st) {
			return
		}
		if time.Now().After(deadline) || i > 5000 {
			t.Fatalf("%s: not within 5s; state %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *suite) testRWInvariant(t *testing.T, ctx context.Context) {
	const backends, readers, writers = 8, 6, 2
	p := prefix()
	locks := make([]*rwlock.RWMutex, backends)
	for i := range locks {
		locks[i] = s.rwOpen(t, p)
	}
	var (
		nReaders, nWriters  atomic.Int32
		maxReaders          atomic.Int32
		violations          atomic.Int32
		shared              atomic.Int64 // read-modify-written by writers only
		writes, reads, torn atomic.Int64
	)
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := range readers + writers {
		m := locks[g%backends]
		writer := g >= readers
		wg.Go(func() {
			for i := 0; i < 100000 && time.Now().Before(stop); i++ {
				lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				if writer {
					if err := m.LockContext(lctx); err != nil {
						cancel()
						t.Errorf("writer: %v", err)
						return
					}
					if nWriters.Add(1) != 1 || nReaders.Load() != 0 {
						violations.Add(1)
					}
					v := shared.Load()
					time.Sleep(time.Duration(rand.N(1000)) * time.Microsecond)
					shared.Store(v + 1)
					writes.Add(1)
					nWriters.Add(-1)
					if err := m.UnlockContext(lctx); err != nil {
						cancel()
						t.Errorf("writer unlock: %v", err)
						return
					}
				} else {
					if err := m.RLockContext(lctx); err != nil {
						cancel()
						t.Errorf("reader: %v", err)
						return
					}
					n := nReaders.Add(1)
					for old := maxReaders.Load(); n > old && !maxReaders.CompareAndSwap(old, n); old = maxReaders.Load() {
					}
					if nWriters.Load() != 0 {
						violations.Add(1)
					}
					v := shared.Load()
					time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
					if shared.Load() != v {
						torn.Add(1)
					}
					reads.Add(1)
					nReaders.Add(-1)
					if err := m.RUnlockContext(lctx); err != nil {
						cancel()
						t.Errorf("reader unlock: %v", err)
						return
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	t.Logf("%d reads, %d writes in 3s, at most %d readers at once", reads.Load(), writes.Load(), maxReaders.Load())
	if v := violations.Load(); v != 0 {
		t.Errorf("%d times a writer held the lock with another holder", v)
	}
	if n := torn.Load(); n != 0 {
		t.Errorf("%d reads saw a write during their hold", n)
	}
	if got, want := shared.Load(), writes.Load(); got != want {
		t.Errorf("shared counter %d after %d writes: a write was lost", got, want)
	}
	if writes.Load() == 0 || reads.Load() == 0 {
		t.Errorf("no progress: %d reads, %d writes", reads.Load(), writes.Load())
	}
	if maxReaders.Load() < 2 {
		t.Errorf("readers never overlapped (at most %d at once)", maxReaders.Load())
	}
	assertNoKeys(t, ctx, s.newBackend(t), p, rwlockWriteKind.key(p, "rw"), time.Hour)
}

// overlappingReaders runs n readers on their own backends, each taking a
// read hold for hold, releasing it and taking the next at once, started
// hold/n apart so that some read hold is always held. It returns the count
// of read holds taken so far and a function that stops them.
func (s *suite) overlappingReaders(t *testing.T, ctx context.Context, p string, n int, hold time.Duration, opts ...rwlock.Option) (*atomic.Int64, func()) {
	var (
		taken atomic.Int64
		wg    sync.WaitGroup
	)
	rctx, cancel := context.WithCancel(ctx)
	for i := range n {
		m := s.rwOpen(t, p, opts...)
		wg.Go(func() {
			if !sleepCtx(rctx, time.Duration(i)*hold/time.Duration(n)) {
				return
			}
			for j := 0; j < 10000 && rctx.Err() == nil; j++ {
				if err := m.RLockContext(rctx); err != nil {
					if rctx.Err() == nil {
						t.Errorf("reader: %v", err)
					}
					return
				}
				taken.Add(1)
				sleepCtx(rctx, hold)
				// Not must: t.FailNow belongs to the test's goroutine.
				if err := m.RUnlockContext(ctx); err != nil {
					t.Errorf("reader unlock: %v", err)
					return
				}
			}
		})
	}
	return &taken, func() { cancel(); wg.Wait() }
}

// chainedReaders runs n readers that each hold a read hold without a
// gap: a reader takes its next read hold on a second backend before it
// releases the one it has, every hold. So some read hold is held from the
// first until stop however slow the machine is, and a writer that gets
// in before stop got in past a held read lock. It returns the count of
// read holds taken so far and a function that stops the readers and
// releases their holds.
func (s *suite) chainedReaders(t *testing.T, ctx context.Context, p string, n int, hold time.Duration, opts ...rwlock.Option) (*atomic.Int64, func()) {
	var (
		taken atomic.Int64
		wg    sync.WaitGroup
	)
	rctx, cancel := context.WithCancel(ctx)
	for range n {
		pair := [2]*rwlock.RWMutex{s.rwOpen(t, p, opts...), s.rwOpen(t, p, opts...)}
		must(t, pair[0].RLockContext(ctx), "first read hold")
		taken.Add(1)
		wg.Go(func() {
			held := 0
			// Not must: t.FailNow belongs to the test's goroutine.
			defer func() {
				if err := pair[held].RUnlockContext(ctx); err != nil {
					t.Errorf("reader unlock: %v", err)
				}
			}()
			for j := 0; j < 10000 && sleepCtx(rctx, hold); j++ {
				if err := pair[1-held].RLockContext(rctx); err != nil {
					if rctx.Err() == nil {
						t.Errorf("reader: %v", err)
					}
					return
				}
				taken.Add(1)
				err := pair[held].RUnlockContext(ctx)
				held = 1 - held
				if err != nil {
					t.Errorf("reader unlock: %v", err)
					return
				}
			}
		})
	}
	return &taken, func() { cancel(); wg.Wait() }
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *suite) testRWWriterNotStarved(t *testing.T, ctx context.Context) {
	const hold = 100 * time.Millisecond
	p := prefix()
	probe := s.rwOpen(t, p)
	_, stop := s.overlappingReaders(t, ctx, p, 4, hold)
	defer stop()
	awaitRW(t, ctx, probe, "readers overlapping", func(st rwlock.State) bool { return st.Readers >= 2 })
	w := s.rwOpen(t, p)
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	start := time.Now()
	must(t, w.LockContext(ctx), "writer")
	waited := time.Since(start)
	worst := trips.Stop()
	st := rwState(t, ctx, w)
	must(t, w.UnlockContext(ctx), "writer unlock")
	t.Logf("the writer waited %v behind readers holding %v each (longest round trip meanwhile %v)", waited, hold, worst)
	// The readers in at the writer's arrival leave within a hold, each
	// release a round trip and the hand-off to the writer two more. A
	// writer that let new readers in waits until they stop: the test's
	// deadline. Four of the longest stalls, or all the stalls the meter
	// saw, whichever is more (see testFixedLease).
	if limit := s.bound(2*hold) + max(4*worst, trips.Stalled()); waited > limit {
		t.Errorf("the writer waited %v; want at most twice the longest read hold and four of the longest round trips or stalls meanwhile (%v), or all the stalls (%v): %v", waited, worst, trips.Stalled(), limit)
	}
	if st.Mode != rwlock.Write || st.Readers != 0 {
		t.Errorf("while the writer held: %+v", st)
	}
}

func (s *suite) testRWReaderPreference(t *testing.T, ctx context.Context) {
	const hold = 100 * time.Millisecond
	p := prefix()
	probe := s.rwOpen(t, p, rwlock.WithReaderPreference())
	taken, stop := s.chainedReaders(t, ctx, p, 4, hold, rwlock.WithReaderPreference())
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	awaitRW(t, ctx, probe, "readers overlapping", func(st rwlock.State) bool { return st.Readers >= 2 })
	w := s.rwOpen(t, p, rwlock.WithReaderPreference())
	got := make(chan error, 1)
	go func() { got <- w.LockContext(ctx) }()
	awaitRW(t, ctx, probe, "writer queued", func(st rwlock.State) bool { return st.WaitingWriters == 1 })
	before := taken.Load()
	select {
	case err := <-got:
		t.Fatalf("the writer got in while readers overlapped (%v)", err)
	case <-time.After(5 * hold):
	}
	entered := taken.Load() - before
	t.Logf("%d read holds were taken while the writer waited %v", entered, 5*hold)
	if entered < 8 {
		t.Errorf("only %d read holds taken in %v while a writer waited; readers must keep entering", entered, 5*hold)
	}
	stop()
	stopped = true
	must(t, within(t, s.bound(5*time.Second), got, "writer after the readers stopped"), "writer")
	must(t, w.UnlockContext(ctx), "writer unlock")
}

func (s *suite) testRWReadersWokenTogether(t *testing.T, ctx context.Context) {
	const readers = 6
	p := prefix()
	w := s.rwOpen(t, p)
	next := s.rwOpen(t, p)
	w.Lock()
	type woke struct {
		at  time.Time
		err error
	}
	got := make(chan woke, readers)
	locks := make([]*rwlock.RWMutex, readers)
	for i := range locks {
		locks[i] = s.rwOpen(t, p)
		go func() {
			err := locks[i].RLockContext(ctx)
			got <- woke{time.Now(), err}
		}()
	}
	awaitRW(t, ctx, w, "readers waiting", func(st rwlock.State) bool { return st.WaitingReaders == readers })
	// A writer that queues after the readers waits for them.
	nextGot := make(chan error, 1)
	go func() { nextGot <- next.LockContext(ctx) }()
	awaitRW(t, ctx, w, "next writer queued", func(st rwlock.State) bool { return st.WaitingWriters == 1 })
	released := time.Now()
	w.Unlock()
	var last time.Duration
	for range readers {
		r := within(t, s.bound(5*time.Second), got, "reader after the write release")
		must(t, r.err, "reader")
		last = max(last, r.at.Sub(released))
	}
	t.Logf("all %d readers held the lock %v after the write release", readers, last)
	if last > s.bound(250*time.Millisecond) {
		t.Errorf("the last reader acquired %v after the write release; they must be woken together", last)
	}
	if st := rwState(t, ctx, w); st.Mode != rwlock.Read || st.Readers != readers || st.WaitingWriters != 1 {
		t.Errorf("after the hand-off: %+v; want %d readers and the writer still queued", st, readers)
	}
	for _, m := range locks {
		m.RUnlock()
	}
	must(t, within(t, s.bound(5*time.Second), nextGot, "writer after the readers"), "writer")
	next.Unlock()
	assertNoKeys(t, ctx, s.newBackend(t), p, rwlockWriteKind.key(p, "rw"), time.Hour)
}

func (s *suite) testRWLastReaderHandsOff(t *testing.T, ctx context.Context) {
	p := prefix()
	r1, r2, w := s.rwOpen(t, p), s.rwOpen(t, p), s.rwOpen(t, p)
	r1.RLock()
	r2.RLock()
	got := make(chan time.Time, 1)
	go func() {
		if err := w.LockContext(ctx); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	awaitRW(t, ctx, r1, "writer queued", func(st rwlock.State) bool { return st.WaitingWriters == 1 })
	r1.RUnlock()
	select {
	case <-got:
		t.Fatal("the writer got in while a reader held")
	case <-time.After(50 * time.Millisecond):
	}
	released := time.Now()
	r2.RUnlock()
	at := within(t, s.bound(5*time.Second), got, "writer after the last reader")
	if d := at.Sub(released); d > s.bound(250*time.Millisecond) {
		t.Errorf("the writer acquired %v after the last read release; it must be woken, not poll", d)
	}
	if tok, err := w.Token(ctx); err != nil || tok <= 0 {
		t.Errorf("handed-off write hold: Token %d, %v", tok, err)
	}
	w.Unlock()
}

func (s *suite) testRWDowngradeUpgrade(t *testing.T, ctx context.Context) {
	p := prefix()
	sp := newSpy(s.newBackend(t))
	m := rwlock.New(sp, "rw", rwlock.WithPrefix(p))
	other := s.rwOpen(t, p)

	// Downgrade: write, then read, then release the write.
	o := dsync.WithOwner(ctx)
	must(t, m.LockContext(o), "lock")
	wtoken, err := m.Token(o)
	must(t, err, "write token")
	must(t, m.RLockContext(o), "read under the write hold")
	if ok, err := other.TryRLockContext(ctx); ok || err != nil {
		t.Errorf("another owner's read while a write hold is held: %v, %v", ok, err)
	}
	must(t, m.UnlockContext(o), "unlock the write hold")
	st := rwState(t, o, m)
	if st.Mode != rwlock.Read || st.ReadCount != 1 || st.WriteCount != 0 {
		t.Errorf("after the downgrade: %+v; want the owner reading", st)
	}
	select {
	case <-m.RDone(o):
		t.Error("RDone closed by the release of the write hold")
	default:
	}
	if ok, err := other.TryLockContext(ctx); ok || err != nil {
		t.Errorf("another owner's write while the downgraded read hold is held: %v, %v", ok, err)
	}
	if ok, err := other.TryRLockContext(ctx); !ok || err != nil {
		t.Errorf("another owner's read after the downgrade: %v, %v", ok, err)
	} else {
		other.RUnlock()
	}

	// Upgrade: the reader asks for write, and is told at once, without I/O.
	before := sp.count()
	start := time.Now()
	if err := m.LockContext(o); !errors.Is(err, dsync.ErrUpgrade) {
		t.Errorf("LockContext of a reader: %v, want ErrUpgrade", err)
	}
	if ok, err := m.TryLockContext(o); ok || !errors.Is(err, dsync.ErrUpgrade) {
		t.Errorf("TryLockContext of a reader: %v, %v, want ErrUpgrade", ok, err)
	}
	if d := time.Since(start); d > s.bound(50*time.Millisecond) {
		t.Errorf("ErrUpgrade took %v; it must be at once", d)
	}
	if n := sp.count() - before; n != 0 {
		t.Errorf("ErrUpgrade after %d calls to the server; want none", n)
	}
	// Misuse of the sides.
	if err := m.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("UnlockContext of a read-only hold: %v, want ErrNotHeld", err)
	}
	must(t, m.RUnlockContext(o), "read unlock")
	if err := m.RUnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("second RUnlockContext: %v, want ErrNotHeld", err)
	}
	w := dsync.WithOwner(ctx)
	must(t, m.LockContext(w), "lock")
	if err := m.RUnlockContext(w); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("RUnlockContext of a write-only hold: %v, want ErrNotHeld", err)
	}
	if tok, err := m.Token(w); err != nil || tok <= wtoken {
		t.Errorf("the next write hold's token %d (%v); want above %d", tok, err, wtoken)
	}
	must(t, m.UnlockContext(w), "unlock")
	if st := rwState(t, ctx, m); st.Mode != rwlock.Free {
		t.Errorf("at the end: %+v", st)
	}
	assertNoKeys(t, ctx, s.newBackend(t), p, rwlockWriteKind.key(p, "rw"), time.Hour)
}

func (s *suite) testRWReentrancy(t *testing.T, ctx context.Context) {
	p := prefix()
	m := s.rwOpen(t, p)
	other := s.rwOpen(t, p)
	for _, side := range []string{"read", "write"} {
		o := dsync.WithOwner(ctx)
		lock, unlock := m.RLockContext, m.RUnlockContext
		count := func(st rwlock.State) int { return st.ReadCount }
		if side == "write" {
			lock, unlock = m.LockContext, m.UnlockContext
			count = func(st rwlock.State) int { return st.WriteCount }
		}
		for i := 1; i <= 5; i++ {
			must(t, lock(o), "%s lock %d", side, i)
			if n := count(rwState(t, o, m)); n != i {
				t.Fatalf("%s: after %d locks the count is %d", side, i, n)
			}
		}
		for i := 4; i >= 0; i-- {
			must(t, unlock(o), "%s unlock", side)
			if n := count(rwState(t, o, m)); n != i {
				t.Fatalf("%s: %d holds left, the count is %d", side, i, n)
			}
			if i > 0 {
				if ok, _ := other.TryLockContext(ctx); ok {
					t.Fatalf("%s: another writer got in with %d holds left", side, i)
				}
			}
		}
		if err := unlock(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("%s: a sixth unlock: %v, want ErrNotHeld", side, err)
		}
	}
	if st := rwState(t, ctx, m); st.Mode != rwlock.Free {
		t.Errorf("at the end: %+v", st)
	}
}

// testRWReaderLeases checks that each read hold has a lease of its own: a
// reader on a fixed lease that never releases stops counting when its
// lease ends, not before, while a reader renewed by its watchdog stays
// across several of its leases. The renewed reader's watchdog lease is a
// second: its renewal, due every third of it, has two thirds of a second
// to land, which a loaded machine keeps.
func (s *suite) testRWReaderLeases(t *testing.T, ctx context.Context) {
	const fixed, renewed = 400 * time.Millisecond, time.Second
	p := prefix()
	gone := s.rwOpen(t, p, rwlock.WithLease(fixed)) // a reader that never releases
	live := s.rwOpen(t, p, rwlock.WithWatchdog(renewed))
	w := s.rwOpen(t, p)
	sent := time.Now()
	gone.RLock()
	took := time.Now()
	// Round trips timed until the expired reader is seen gone show how
	// long the machine held up the polls that see it.
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	ended := make(chan time.Time, 1)
	go func() {
		select {
		case <-gone.RDone(ctx):
			ended <- time.Now()
		case <-ctx.Done():
		}
	}()
	live.RLock()
	// The expired reader stops counting when its lease ends; the renewed
	// one is still there after several of its leases. RDone closes the
	// margin before the lease ends (1% of it and 2ms), counted from the
	// call: never earlier, however late the test sees it.
	at := within(t, s.bound(fixed+time.Second), ended, "RDone of the expired reader")
	if early := fixed - fixed/100 - 2*time.Millisecond; at.Sub(sent) < early {
		t.Errorf("RDone of the fixed lease closed %v after the call; want at least %v", at.Sub(sent), early)
	}
	awaitRW(t, ctx, w, "the expired reader gone", func(st rwlock.State) bool { return st.Readers == 1 })
	slow := trips.Stop()
	// Twice the longest stall, or all the stalls the meter saw, whichever
	// is more (see testFixedLease).
	if d, more := time.Since(took), s.bound(200*time.Millisecond)+max(2*slow, trips.Stalled()); d > fixed+more {
		t.Errorf("the expired reader counted for %v; its lease was %v (checked with %v more: 200ms, and twice the longest round trip or stall timed meanwhile, %v, or all the stalls, %v)", d, fixed, more, slow, trips.Stalled())
	}
	sleepCtx(ctx, 3*renewed)
	select {
	case <-live.RDone(ctx):
		t.Fatal("the renewed reader lost its hold")
	default:
	}
	if ok, err := w.TryLockContext(ctx); ok || err != nil {
		t.Errorf("a writer got in past the renewed reader: %v, %v", ok, err)
	}
	got := make(chan error, 1)
	go func() { got <- w.LockContext(ctx) }()
	awaitRW(t, ctx, w, "writer queued", func(st rwlock.State) bool { return st.WaitingWriters == 1 })
	live.RUnlock()
	must(t, within(t, s.bound(5*time.Second), got, "writer after the renewed reader released"), "writer")
	w.Unlock()
	if err := gone.RUnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("RUnlock of the expired reader: %v, want ErrNotHeld", err)
	}
}

// deadWriterScript queues a writer entry that no waiter will beat for,
// expiring after ARGV[2] ms: a writer whose process died while it waited.
// It writes what a writer's registration on a free lock writes: the entry,
// and the lock's main key in the shared form, outliving it (the lock's
// main key exists whenever a waiter is queued, so that a plain SET NX of
// it takes only a lock nothing is on). Until issue 32 it wrote the entry
// alone, a state the lock never writes, which a plain reader now passes.
var deadWriterScript = backend.NewScript(`-- KEYS[1] writer queue, KEYS[2] writer
-- expiry, KEYS[3] the lock's main key.
-- ARGV[1] entry; ARGV[2] ms until it expires. Reply: OK.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], 1, ARGV[1])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], t[1] .. string.format('%06d', tonumber(t[2])) .. ' shared', 'NX', 'PX', tonumber(ARGV[2]) + 2)
return 'OK'`)

func (s *suite) testRWDeadWaitingWriter(t *testing.T, ctx context.Context) {
	const timeout = 600 * time.Millisecond
	p := prefix()
	b := s.newBackend(t)
	m := rwlock.New(b, "rw", rwlock.WithPrefix(p), rwlock.WithWaiterTimeout(timeout))
	key := rwlockWriteKind.key(p, "rw")
	_, err := b.Eval(ctx, deadWriterScript, []string{key + ":wqueue", key + ":wexpiry", key},
		"deadhub/deadop|2000|deadowner", timeout.Milliseconds())
	must(t, err, "queue a dead writer")
	start := time.Now()
	if ok, err := m.TryRLockContext(ctx); ok || err != nil {
		t.Fatalf("a reader got in past a queued writer: %v, %v", ok, err)
	}
	must(t, m.RLockContext(ctx), "reader behind a dead writer")
	waited := time.Since(start)
	m.RUnlock()
	t.Logf("a dead waiting writer held a reader up %v (waiter timeout %v)", waited, timeout)
	if waited > timeout+timeout/3+s.bound(300*time.Millisecond) {
		t.Errorf("the reader waited %v; want at most the waiter timeout %v and a heartbeat", waited, timeout)
	}
}

func (s *suite) testRWLostSignal(t *testing.T, ctx context.Context) {
	const renewed = 300 * time.Millisecond
	p := prefix()
	b := s.newBackend(t)
	r1 := rwlock.New(b, "rw", rwlock.WithPrefix(p), rwlock.WithWatchdog(renewed))
	r2 := s.rwOpen(t, p, rwlock.WithWatchdog(renewed))
	w := s.rwOpen(t, p+"w", rwlock.WithWatchdog(renewed))
	r1.RLock()
	r2.RLock()
	w.Lock()
	key, wkey := rwlockWriteKind.key(p, "rw"), rwlockWriteKind.key(p+"w", "rw")
	// Each loss is seen by a renewal, a round trip: the bound allows twice
	// the longest timed meanwhile (see tripmeter.Meter).
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	_, err := b.Eval(ctx, delScript, []string{key + ":readers", key + ":rexpiry", wkey})
	must(t, err, "DEL")
	for what, c := range map[string]<-chan struct{}{"RDone 1": r1.RDone(ctx), "RDone 2": r2.RDone(ctx), "Done": w.Done(ctx)} {
		withinTrips(t, s.bound(renewed+2*time.Second), c, trips, what+" after the keys were deleted")
	}
	trips.Stop()
	for _, m := range []*rwlock.RWMutex{r1, r2} {
		if err := m.RUnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("RUnlock of a lost hold: %v, want ErrNotHeld", err)
		}
	}
	if err := w.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Unlock of a lost hold: %v, want ErrNotHeld", err)
	}
}

func (s *suite) testRWGiveUpStorm(t *testing.T, ctx context.Context) {
	p := prefix()
	holder := s.rwOpen(t, p)
	holder.Lock()
	var wg sync.WaitGroup
	for i := range 20 {
		m := s.rwOpen(t, p)
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, time.Duration(50+rand.N(150))*time.Millisecond)
			defer cancel()
			var err error
			if i%2 == 0 {
				err = m.RLockContext(wctx)
			} else {
				err = m.LockContext(wctx)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a waiter that gave up: %v", err)
			}
		})
	}
	wg.Wait()
	// A waiter that gave up leaves the queue by its clean-up, which its
	// call waits for 100ms and then leaves to run in the background (a
	// loaded machine): the queue empties once the clean-ups are done.
	awaitRW(t, ctx, holder, "the waiters that gave up gone from the queue", func(st rwlock.State) bool {
		return st.WaitingReaders == 0 && st.WaitingWriters == 0 && st.Readers == 0
	})
	holder.Unlock()
	// The lock is free for a new reader and writer at once.
	m := s.rwOpen(t, p)
	if ok, err := m.TryLockContext(ctx); !ok || err != nil {
		t.Fatalf("TryLock after the storm: %v, %v", ok, err)
	}
	m.Unlock()
	assertNoKeys(t, ctx, s.newBackend(t), p, rwlockWriteKind.key(p, "rw"), time.Hour)
}

func (s *suite) testRWBadInput(t *testing.T, ctx context.Context) {
	sp := newSpy(s.newBackend(t))
	for name, c := range map[string]struct {
		m    *rwlock.RWMutex
		want error
	}{
		"empty name":  {rwlock.New(sp, ""), dsync.ErrInvalidName},
		"zero lease":  {rwlock.New(sp, "x", rwlock.WithLease(0)), dsync.ErrInvalidLease},
		"bad waiter":  {rwlock.New(sp, "x", rwlock.WithWaiterTimeout(time.Millisecond)), dsync.ErrInvalidLease},
		"nil backend": {rwlock.New(nil, "x"), dsync.ErrInvalidBackend},
		"zero value":  {new(rwlock.RWMutex), dsync.ErrInvalidBackend},
	} {
		if err := c.m.RLockContext(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: RLockContext: %v, want %v", name, err, c.want)
		}
		if _, err := c.m.TryRLockContext(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: TryRLockContext: %v, want %v", name, err, c.want)
		}
		if err := c.m.RUnlockContext(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: RUnlockContext: %v, want %v", name, err, c.want)
		}
		if _, err := c.m.State(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: State: %v, want %v", name, err, c.want)
		}
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: RLock did not panic", name)
				}
			}()
			c.m.RLock()
		}()
	}
	m := rwlock.New(sp, "x", rwlock.WithPrefix(prefix()))
	if err := m.RUnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("RUnlockContext without a hold: %v, want ErrNotHeld", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("RUnlock without a hold did not panic")
			}
		}()
		m.RLocker().Unlock()
	}()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.RLockContext(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("RLockContext with a cancelled ctx: %v", err)
	}
	if n := sp.count(); n != 0 {
		t.Errorf("bad input reached the server: %d calls", n)
	}
}

// testRWNoOvertake checks that a write hold that runs out with a live
// writer queued behind it lets no newcomer in ahead of that writer. The
// writer must queue while the hold lasts, which a loaded machine may
// miss: then the test runs again, on a lease twice as long, three times
// at most.
func (s *suite) testRWNoOvertake(t *testing.T, ctx context.Context) {
	s.queuedWithinLease(t, "the writer", func(lease time.Duration) bool { return s.rwNoOvertakeRound(t, ctx, lease) })
}

// rwNoOvertakeRound runs testRWNoOvertake with a write hold on lease, and
// reports false, having checked nothing, if the waiting writer did not
// queue while the hold lasted.
func (s *suite) rwNoOvertakeRound(t *testing.T, ctx context.Context, lease time.Duration) bool {
	p := prefix()
	open := func(b backend.Backend) *rwlock.RWMutex { return rwlock.New(b, "rw", rwlock.WithPrefix(p)) }
	probe := open(s.newBackend(t))
	// The waiter makes no attempt from when it queued until it is let
	// go, as a process stalled between two attempts: its place lasts the
	// waiter timeout (5s), and the write hold is gone with it queued once
	// the hold ran out. Its backend is made, and reaches the server,
	// before the hold's lease starts.
	wb := newStalled(t, s.newBackend(t))
	waiter := open(wb)
	rwState(t, ctx, waiter)
	holder := rwlock.New(s.newBackend(t), "rw", rwlock.WithPrefix(p), rwlock.WithLease(lease))
	must(t, holder.LockContext(ctx), "lock") // never unlocked: the hold runs out
	var o order
	got := make(chan int, 2)
	proceed := make(chan struct{})
	inTurn(t, ctx, "waiter", 0, &o, got, proceed, waiter.LockContext, waiter.UnlockContext)
	// The holder's hold, not the waiter's: a hold handed to a waiter
	// starts on a lease of 2s (see package rwlock), longer than lease.
	held := func(st rwlock.State) bool { return st.Mode == rwlock.Write && st.TTL <= lease }
	awaitRW(t, ctx, probe, "the writer queued, or the hold gone", func(st rwlock.State) bool { return st.WaitingWriters == 1 || !held(st) })
	wb.shut()
	// The waiter's next attempt is due when the hold ends: one that was
	// under way as the waiter stalled found the hold live.
	if st := rwState(t, ctx, probe); st.WaitingWriters != 1 || !held(st) || st.TTL < lease/10 {
		t.Logf("the lock once the waiter stalled: %+v", st)
		wb.open()
		close(proceed)
		within(t, s.bound(5*time.Second), got, "the waiter")
		return false
	}
	time.Sleep(lease + s.bound(100*time.Millisecond))
	if st := rwState(t, ctx, probe); st.Mode != rwlock.Free || st.WaitingWriters != 1 {
		t.Fatalf("past the write hold's lease: %+v; want free with the writer queued", st)
	}
	// Newcomers with one plain SET NX where the backend has it, and
	// through the acquire scripts: a fresh handle each, whose first
	// attempt is the plain one.
	for _, b := range []backend.Backend{s.newBackend(t), elsewhere{s.newBackend(t)}} {
		if ok, err := open(b).TryLockContext(ctx); ok || err != nil {
			t.Fatalf("a newcomer's TryLock on %T past the write hold's lease = %v, %v; want false: a live writer is queued", b, ok, err)
		}
		if ok, err := open(b).TryRLockContext(ctx); ok || err != nil {
			t.Fatalf("a newcomer's TryRLock on %T past the write hold's lease = %v, %v; want false: a live writer is queued", b, ok, err)
		}
	}
	newcomer := open(s.newBackend(t))
	inTurn(t, ctx, "newcomer", 1, &o, got, nil, newcomer.LockContext, newcomer.UnlockContext)
	awaitRW(t, ctx, probe, "the newcomer queued", func(st rwlock.State) bool { return st.WaitingWriters == 2 })
	wb.open()
	close(proceed)
	within(t, s.bound(5*time.Second), got, "an acquisition")
	within(t, s.bound(5*time.Second), got, "an acquisition")
	o.check(t, 2)
	return true
}

func (s *suite) testRWReadersFirst(t *testing.T, ctx context.Context) {
	s.queuedWithinLease(t, "the reader", func(lease time.Duration) bool { return s.rwReadersFirstRound(t, ctx, lease) })
}

// rwReadersFirstRound runs testRWReadersFirst with a write hold on lease,
// and reports false, having checked nothing, if the waiting reader did not
// register while the hold lasted.
func (s *suite) rwReadersFirstRound(t *testing.T, ctx context.Context, lease time.Duration) bool {
	p := prefix()
	open := func(b backend.Backend) *rwlock.RWMutex { return rwlock.New(b, "rw", rwlock.WithPrefix(p)) }
	probe := open(s.newBackend(t))
	// The reader makes no attempt from when it registered until it is let
	// go, as a process stalled between two attempts: the write hold is
	// gone with it waiting once the hold ran out, and only the writers'
	// scripts run meanwhile. Wake-ups still reach it. Both waiters'
	// backends are made, and reach the server, before the hold's lease
	// starts: on a loaded machine that may take most of it.
	rb := newStalled(t, s.newBackend(t))
	reader, writer := open(rb), open(s.newBackend(t))
	rwState(t, ctx, reader)
	rwState(t, ctx, writer)
	holder := rwlock.New(s.newBackend(t), "rw", rwlock.WithPrefix(p), rwlock.WithLease(lease))
	must(t, holder.LockContext(ctx), "lock") // never unlocked: the hold runs out
	var o order
	got := make(chan int, 3)
	proceed := make(chan struct{})
	inTurn(t, ctx, "reader", 0, &o, got, proceed, reader.RLockContext, reader.RUnlockContext)
	held := func(st rwlock.State) bool { return st.Mode == rwlock.Write && st.TTL <= lease }
	awaitRW(t, ctx, probe, "the reader registered, or the hold gone", func(st rwlock.State) bool { return st.WaitingReaders == 1 || !held(st) })
	rb.shut()
	// A writer queued behind the reader, whose attempt at the hold's end
	// finds the reader waiting.
	inTurn(t, ctx, "writer", 1, &o, got, nil, writer.LockContext, writer.UnlockContext)
	awaitRW(t, ctx, probe, "the writer queued, or the hold gone", func(st rwlock.State) bool { return st.WaitingWriters == 1 || !held(st) })
	if st := rwState(t, ctx, probe); st.WaitingReaders != 1 || st.WaitingWriters != 1 || !held(st) || st.TTL < lease/10 {
		t.Logf("the lock once both waited: %+v", st)
		rb.open()
		close(proceed)
		within(t, s.bound(5*time.Second), got, "an acquisition")
		within(t, s.bound(5*time.Second), got, "an acquisition")
		return false
	}
	time.Sleep(lease + s.bound(100*time.Millisecond))
	// The reader is due, handed the lock or waiting still; the writer waits.
	if st := rwState(t, ctx, probe); st.Mode == rwlock.Write || st.WaitingWriters != 1 || st.Readers+st.WaitingReaders != 1 {
		t.Fatalf("past the write hold's lease: %+v; want the reader handed the lock or waiting, and the writer queued", st)
	}
	// Newcomers with one plain SET NX where the backend has it, and
	// through the acquire script.
	for _, b := range []backend.Backend{s.newBackend(t), elsewhere{s.newBackend(t)}} {
		if ok, err := open(b).TryLockContext(ctx); ok || err != nil {
			t.Fatalf("a newcomer's TryLock on %T past the write hold's lease = %v, %v; want false: a reader waited out the write", b, ok, err)
		}
	}
	newcomer := open(s.newBackend(t))
	inTurn(t, ctx, "newcomer", 2, &o, got, nil, newcomer.LockContext, newcomer.UnlockContext)
	awaitRW(t, ctx, probe, "the newcomer queued", func(st rwlock.State) bool { return st.WaitingWriters == 2 })
	rb.open()
	close(proceed)
	for range 3 {
		within(t, s.bound(5*time.Second), got, "an acquisition")
	}
	o.check(t, 3)
	return true
}
