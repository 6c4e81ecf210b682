package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/options"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/internal/wait"
)

var (
	delScript = backend.NewScript(`-- KEYS: keys to delete. Reply: how many existed.
return redis.call('DEL', unpack(KEYS))`)

	zcardScript = backend.NewScript(`-- KEYS[1]: a sorted set. Reply: its size.
return redis.call('ZCARD', KEYS[1])`)

	keysScript = backend.NewScript(`-- KEYS: none, or one that only routes the call to a cluster node.
-- ARGV[1]: a KEYS pattern.
-- Reply: {key, pttl, value ('' unless a string), ...} for every
-- matching key.
local out = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  out[#out + 1] = k
  out[#out + 1] = redis.call('PTTL', k)
  local v = ''
  if redis.call('TYPE', k).ok == 'string' then
    v = redis.call('GET', k)
  end
  out[#out + 1] = v
end
return out`)
)

// exclusiveTests is the table every exclusive lock passes: each case names
// the rule of the design it checks.
func (s *suite) exclusiveRules(k lockKind) []rule {
	cases := []struct {
		name, rule string
		exclusive  bool
		fn         func(*testing.T, context.Context, lockKind)
	}{
		{"MutualExclusion", "one holder at a time, across backends, owned and ownerless", true, s.testMutualExclusion},
		{"ManyGoroutines", "500 waiters (100 with -short; fewer, at least 50, on a server slow to run scripts) on 4 backends all acquire in turn", true, s.testManyGoroutines},
		{"GiveUpStorm", "waiters that give up leave nothing held or queued", true, s.testGiveUpStorm},
		{"Reentrancy", "an owner re-enters, counted; another owner waits", false, s.testReentrancy},
		{"OwnerlessNotReentrant", "a ctx without owner is not reentrant, like sync.Mutex", false, s.testOwnerlessNotReentrant},
		{"LockerAcrossGoroutines", "sync.Locker: Unlock from another goroutine", false, s.testLockerAcrossGoroutines},
		{"Watchdog", "the watchdog renews while held and stops after release", false, s.testWatchdog},
		{"FixedLease", "a fixed lease expires, the lost signal fires, a waiter takes over", false, s.testFixedLease},
		{"LostSignal", "a hold deleted on the server fires Done within a renewal interval", false, s.testLostSignal},
		{"LostSignalScriptFlush", "the lost signal survives a SCRIPT FLUSH", true, s.testLostSignalScriptFlush},
		{"LostSignalDuringPartialRelease", "a hold that vanishes while a partial release is in flight is reported lost", false, s.testLostSignalDuringPartialRelease},
		{"UnlockMisuse", "no owner releases another's hold; misuse is ErrNotHeld or a panic", false, s.testUnlockMisuse},
		{"UnlockEndedContext", "a release does not depend on the caller's cancellation", false, s.testUnlockEndedContext},
		{"UnlockThroughAnotherBackend", "a hold belongs to its owner and to the backend value that took it", false, s.testUnlockThroughAnotherBackend},
		{"HandOff", "a release hands the lock to a waiter in another process through pub/sub", true, s.testHandOff},
		{"WaitAcrossPubSubKill", "waiters survive a killed pub/sub connection", true, s.testWaitAcrossPubSubKill},
		{"ForceUnlock", "ForceUnlock frees, hands on, and the holder learns of the loss", false, s.testForceUnlock},
		{"FencingTokens", "tokens strictly increase, survive lost keys, repeat on re-entry", false, s.testFencingTokens},
		{"AmbiguousAcquire", "an acquisition retried after a lost reply counts once", false, s.testAmbiguousAcquire},
		{"AmbiguousRelease", "a release retried after a lost reply releases once", false, s.testAmbiguousRelease},
		{"AbandonedWait", "waiters that give up do not swallow a wake-up", false, s.testAbandonedWait},
		{"ForeignValue", "a key dsync did not write is an error, left untouched", false, s.testForeignValue},
		{"BadInput", "bad input is a sentinel error before any I/O", false, s.testBadInput},
		{"ManyHoldsAcrossSlots", "200 holds over every slot range survive three renewal intervals (backend.Sharded on a cluster)", true, s.testManyHoldsAcrossSlots},
		{"ContentionAcrossSlots", "one holder per name among 200 names over every slot range, with renewals and hand-offs", true, s.testContentionAcrossSlots},
	}
	rs := make([]rule, len(cases))
	for i, c := range cases {
		rs[i] = rule{c.name, c.rule, c.exclusive, func(t *testing.T, ctx context.Context) { c.fn(t, ctx, k) }}
	}
	return append(rs, s.releaseRules("", k.releases())...)
}

// assertNoKeys fails t if keys under p remain, other than the one that
// keeps the last fencing token of a free lock ("<token> free" at the lock
// key) or a free semaphore's grant counter ("<grant> free", or "<grant>
// free o" with a capacity set at runtime), with a TTL no longer than
// limit. The
// listing runs where key lives: on a cluster, the node that holds every
// key of key's lock.
func assertNoKeys(t *testing.T, ctx context.Context, b backend.Backend, p, key string, limit time.Duration) {
	t.Helper()
	reply, err := b.Eval(ctx, keysScript, []string{key}, p+":*")
	must(t, err, "list keys")
	a, err := backend.Array(reply, 0)
	must(t, err, "list keys")
	for i := 0; i+2 < len(a); i += 3 {
		k, _ := a[i].(string)
		ttl, _ := backend.Int(a[i+1])
		v, _ := a[i+2].(string)
		if token, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSuffix(v, " o"), " free"), 10, 64); err == nil && token > 0 && ttl > 0 && ttl <= limit.Milliseconds() {
			continue
		}
		t.Errorf("key %s = %q left behind (pttl %dms)", k, v, ttl)
	}
}

func (s *suite) testMutualExclusion(t *testing.T, ctx context.Context, k lockKind) {
	const backends, perBackend = 8, 4
	rounds := 2000
	if testing.Short() {
		// A quarter: on miniredis under -race an acquisition among 32
		// contenders costs milliseconds of scripts.
		rounds = 500
	}
	p := prefix()
	var (
		shared  int // read-modify-written without atomics: the mutex protects it
		inside  atomic.Int32
		overlap atomic.Int32
		next    atomic.Int32
	)
	critical := func() {
		if inside.Add(1) != 1 {
			overlap.Add(1)
		}
		v := shared
		if next.Load()%16 == 0 {
			time.Sleep(50 * time.Microsecond) // widen the window now and then
		}
		shared = v + 1
		inside.Add(-1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, backends*perBackend)
	var b0 backend.Backend
	for i := 0; i < backends; i++ {
		b := s.newBackend(t)
		if i == 0 {
			b0 = b
		}
		m := k.open(b, "counter", lockConfig{prefix: p})
		for j := 0; j < perBackend; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owned := j%2 == 0
				octx := dsync.WithOwner(ctx)
				for int(next.Add(1)) <= rounds {
					if owned {
						// An owner, and now and then a nested re-entry.
						if err := m.LockContext(octx); err != nil {
							errs <- err
							return
						}
						nested := next.Load()%5 == 0
						if nested {
							if err := m.LockContext(octx); err != nil {
								errs <- err
								return
							}
						}
						critical()
						if nested {
							if err := m.UnlockContext(octx); err != nil {
								errs <- err
								return
							}
						}
						if err := m.UnlockContext(octx); err != nil {
							errs <- err
							return
						}
					} else {
						// Ownerless, through the handle shared by this
						// backend's goroutines, as with sync.Mutex.
						if err := m.LockContext(ctx); err != nil {
							errs <- err
							return
						}
						critical()
						if err := m.UnlockContext(ctx); err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d times two holders were inside the critical section", n)
	}
	// Each claimed round incremented once; lost updates would show here.
	if shared != rounds {
		t.Errorf("shared counter %d after %d rounds", shared, rounds)
	}
	assertNoKeys(t, ctx, b0, p, k.key(p, "counter"), options.DefaultFenceTTL)
}

// testGiveUpStorm has waiters give up all the time, most of them while an
// attempt of theirs is in flight or just queued (deadlines from none to
// about two round trips, as measured at the start), and holders release
// with deadlines about a round trip long. It checks that nobody is left
// registered or holding: a waiter that gave up but is handed the mutex
// holds it up for the 2s hand-off lease, an acquisition that lands after
// its waiter gave up holds it for the whole lease, and either would show
// here as a key left behind or as a stalled mutex.
func (s *suite) testGiveUpStorm(t *testing.T, ctx context.Context, k lockKind) {
	const backends, perBackend, duration = 4, 4, time.Second
	p := prefix()
	// A step of 100µs, or a tenth of the median round trip on a slower
	// machine: the short deadlines then span about two round trips.
	step := max(100*time.Microsecond, medianTrip(t, ctx, s.newBackend(t))/10)
	var (
		inside, overlap, acquired atomic.Int32
		wg                        sync.WaitGroup
	)
	errs := make(chan error, backends*perBackend)
	stop := time.Now().Add(duration)
	var b0 backend.Backend
	for i := 0; i < backends; i++ {
		b := s.newBackend(t)
		if i == 0 {
			b0 = b
		}
		m := k.open(b, "storm", lockConfig{prefix: p})
		for j := 0; j < perBackend; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; time.Now().Before(stop) && k < 100000; k++ {
					// Deadlines from 0 to 20 steps: shorter than a
					// wait, about a round trip. One attempt in eight
					// waits its turn, so that holders come and go in
					// the storm however slow the machine.
					d := time.Duration((i*perBackend+j+k)%20) * step
					if k%8 == 7 {
						d = s.bound(time.Second)
					}
					lctx, cancel := context.WithTimeout(ctx, d)
					err := m.LockContext(lctx)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						overlap.Add(1)
					}
					inside.Add(-1)
					acquired.Add(1)
					// A release may outlive its deadline too, and must
					// still hand the mutex on to whom it wakes: it goes
					// on in the background when the call returns by its
					// deadline (plus 100ms) without knowing its outcome.
					uctx, cancel := context.WithTimeout(ctx, time.Duration(k%10+1)*step)
					err = m.UnlockContext(uctx)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						// Its outcome not known within the grace (a
						// loaded machine): the release goes on in the
						// background, and the check below sees whether
						// it landed.
						err = nil
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d times two holders were inside the critical section", n)
	}
	if acquired.Load() == 0 {
		t.Error("no acquisition in the storm")
	}
	// Every waiter that gave up cleaned up after itself: nothing holds
	// the mutex, and nobody is left registered to be handed it. (The test
	// runs alone: Settle waits for its own releases and clean-ups only.)
	wait.Settle()
	assertNoKeys(t, ctx, b0, p, k.key(p, "storm"), options.DefaultFenceTTL)
	free := k.open(b0, "storm", lockConfig{prefix: p})
	fctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := free.LockContext(fctx); err != nil {
		t.Fatalf("the mutex is not free after the storm: %v", err)
	}
	must(t, free.UnlockContext(fctx), "unlock")
}

func (s *suite) testManyGoroutines(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	bs := []backend.Backend{s.newBackend(t), s.newBackend(t), s.newBackend(t), s.newBackend(t)}
	gate := k.open(bs[0], "many", lockConfig{prefix: p})
	n := manyWaiters(t, ctx, gate)
	queue := k.key(p, "many") + ":" + k.waiters
	quick := probe(t, ctx, bs[1], queue)
	var holders atomic.Int32
	// The waiters' first attempts all go to the server at once. The
	// first release waits until the server has answered them (see
	// settle): behind them it could outlast its own bound (5s) on a
	// server that runs a script in milliseconds, as miniredis does under
	// -race on a loaded machine.
	must(t, gate.LockContext(ctx), "lock the gate")
	holders.Add(1)
	var wg, calling sync.WaitGroup
	// A case that fails before the waiters are done stops them: they
	// would load the server under the next case.
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		wg.Wait()
	}()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		calling.Add(1)
		go func() {
			defer wg.Done()
			// The test's deadline, not a shorter one: hundreds of
			// holds in turn take seconds on a loaded machine (-race,
			// packages in parallel), and a waiter giving up is not
			// what this tests.
			cctx := ctx
			// The mutex's waiter timeout (fixed) for the kinds that
			// take one: each waiter's heartbeat is a script, and
			// hundreds of waiters beating every 1.7s (the default 5s
			// timeout's) load a slow server more than the hand-offs
			// do.
			m := k.open(bs[i%len(bs)], "many", lockConfig{prefix: p, waiterTimeout: 15 * time.Second})
			calling.Done()
			if err := m.LockContext(cctx); err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", i, err)
				return
			}
			if holders.Add(1) != 1 {
				errs <- fmt.Errorf("goroutine %d: two holders", i)
			}
			holders.Add(-1)
			if err := m.UnlockContext(cctx); err != nil {
				errs <- fmt.Errorf("goroutine %d: unlock: %w", i, err)
			}
		}()
	}
	calling.Wait()
	settle(t, ctx, bs[1], queue, quick)
	holders.Add(-1)
	must(t, gate.UnlockContext(ctx), "unlock the gate")
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assertNoKeys(t, ctx, bs[0], p, k.key(p, "many"), options.DefaultFenceTTL)
}

// manyWaiters returns how many waiters ManyGoroutines starts: 500 (100
// with -short), or as many as the server answers a lock and an unlock of
// m for in 1.5s if fewer, but at least 50: every waiter's heartbeat is a
// script, and hundreds of them keep a server that runs a script in
// milliseconds (miniredis under -race) too busy to answer a release
// within its bound. The pair's time is the second slowest of seven, so
// that one stall of the machine does not cut the case down.
func manyWaiters(t *testing.T, ctx context.Context, m exclusiveLock) int {
	most := 500
	if testing.Short() {
		most = 100
	}
	var pairs []time.Duration
	for i := range 8 {
		start := time.Now()
		must(t, m.LockContext(ctx), "lock")
		must(t, m.UnlockContext(ctx), "unlock")
		if i > 0 { // the first loads the scripts
			pairs = append(pairs, time.Since(start))
		}
	}
	slices.Sort(pairs)
	pair := pairs[len(pairs)-2]
	n := min(max(int(1500*time.Millisecond/max(pair, time.Microsecond)), 50), most)
	t.Logf("%d waiters: a lock and an unlock took %v (the second slowest of %d)", n, pair, len(pairs))
	return n
}

// probe returns the quickest of three round trips to the node of key
// through b, on a server with nothing queued.
func probe(t *testing.T, ctx context.Context, b backend.Backend, key string) time.Duration {
	t.Helper()
	quickest := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		_, err := b.Eval(ctx, zcardScript, []string{key})
		must(t, err, "ZCARD")
		quickest = min(quickest, time.Since(start))
	}
	return quickest
}

// settle returns once three round trips in a row to the node of key
// through b take no longer than three times quick (see probe), or 20ms if
// longer: the calls sent before them have been answered.
func settle(t *testing.T, ctx context.Context, b backend.Backend, key string, quick time.Duration) {
	t.Helper()
	bound := max(3*quick, 20*time.Millisecond)
	for i, inRow := 0, 0; i < 1000; i++ {
		start := time.Now()
		_, err := b.Eval(ctx, zcardScript, []string{key})
		must(t, err, "ZCARD")
		if inRow++; time.Since(start) > bound {
			inRow = 0
		}
		if inRow == 3 {
			return
		}
	}
	t.Fatalf("round trips to the server stayed over %v for 1000 round trips", bound)
}

func (s *suite) testReentrancy(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	m := k.open(s.newBackend(t), "re", lockConfig{prefix: p})
	other := k.open(s.newBackend(t), "re", lockConfig{prefix: p})
	a := dsync.WithOwner(ctx)
	b := dsync.WithOwner(ctx)
	var first int64
	for i := 1; i <= 10; i++ {
		must(t, m.LockContext(a), "lock %d", i)
		tok, err := m.Token(a)
		must(t, err, "token")
		if i == 1 {
			first = tok
		} else if tok != first {
			t.Errorf("re-entry %d: token %d, want %d", i, tok, first)
		}
	}
	if n, err := m.HoldCount(a); err != nil || n != 10 {
		t.Fatalf("HoldCount = %d, %v; want 10", n, err)
	}
	if n, err := m.HoldCount(b); err != nil || n != 0 {
		t.Errorf("HoldCount of another owner = %d, %v; want 0", n, err)
	}
	for i := 1; i <= 10; i++ {
		ok, err := other.TryLockContext(b)
		must(t, err, "trylock by another owner")
		if ok {
			t.Fatalf("another owner acquired after %d of 10 unlocks", i-1)
		}
		must(t, m.UnlockContext(a), "unlock %d", i)
	}
	ok, err := other.TryLockContext(b)
	must(t, err, "trylock after the last unlock")
	if !ok {
		t.Fatal("another owner could not acquire after 10 unlocks")
	}
	if err := m.UnlockContext(a); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("11th unlock: %v, want ErrNotHeld", err)
	}
	must(t, other.UnlockContext(b), "unlock by the second owner")
}

func (s *suite) testOwnerlessNotReentrant(t *testing.T, ctx context.Context, k lockKind) {
	m := k.open(s.newBackend(t), "plain", lockConfig{prefix: prefix()})
	must(t, m.LockContext(ctx), "lock")
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := m.LockContext(wctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second ownerless LockContext: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("second ownerless LockContext gave up after %v, before its deadline", d)
	}
	if ok, err := m.TryLockContext(ctx); ok || err != nil {
		t.Errorf("ownerless TryLockContext while held: %v, %v", ok, err)
	}
	must(t, m.UnlockContext(ctx), "unlock")
	// The second LockContext's clean-up goes on in the background when
	// the server is slow to answer (see wait.Cleanup): until it lands, the
	// release may hand the lock to the waiter that gave up, and the
	// clean-up gives it back, within its bound. (wait.Settle would wait
	// for the other cases' clean-ups too, which run alongside.)
	bound := time.Now().Add(wait.AbandonTimeout + time.Second)
	for {
		locked, err := m.IsLocked(ctx)
		if err == nil && !locked {
			break
		}
		if time.Now().After(bound) {
			t.Errorf("after unlock: IsLocked %v, %v, %v after the give-up's clean-up began", locked, err, wait.AbandonTimeout+time.Second)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *suite) testLockerAcrossGoroutines(t *testing.T, ctx context.Context, k lockKind) {
	m := k.open(s.newBackend(t), "locker", lockConfig{prefix: prefix()})
	var l sync.Locker = m
	l.Lock()
	unlocked := make(chan struct{})
	go func() {
		l.Unlock() // another goroutine releases, as sync.Mutex allows
		close(unlocked)
	}()
	within(t, s.bound(5*time.Second), unlocked, "Unlock from another goroutine")
	acquired := make(chan struct{})
	go func() {
		l.Lock()
		close(acquired)
	}()
	within(t, s.bound(5*time.Second), acquired, "Lock after the release")
	l.Unlock()
}

// sampleTTL reads the mutex's remaining lease every 20ms for d and returns
// the smallest value seen.
func sampleTTL(t *testing.T, ctx context.Context, m exclusiveLock, d time.Duration) time.Duration {
	t.Helper()
	least := time.Duration(1<<63 - 1)
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end) && i < 10000; i++ {
		ttl, err := m.TTL(ctx)
		must(t, err, "ttl")
		least = min(least, ttl)
		time.Sleep(20 * time.Millisecond)
	}
	return least
}

func (s *suite) testWatchdog(t *testing.T, ctx context.Context, k lockKind) {
	const leaseD = time.Second
	p := prefix()
	sp := newSpy(s.newBackend(t))
	m := k.open(sp, "dog", lockConfig{prefix: p, watchdog: leaseD})
	must(t, m.LockContext(ctx), "lock")
	done := m.Done(ctx)

	// Four leases' worth of holding: the watchdog keeps it. A renewal is
	// due when two thirds of the lease remain; on a loaded machine it may
	// land as much later as the longest round trip timed meanwhile.
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	least := sampleTTL(t, ctx, m, 4*leaseD)
	slow := trips.Stop()
	select {
	case <-done:
		t.Fatal("hold lost while the watchdog was renewing it")
	default:
	}
	if least < leaseD/3-slow {
		t.Errorf("remaining lease fell to %v, below lease/3 = %v less %v, the longest round trip timed meanwhile", least, leaseD/3, slow)
	}
	other := k.open(s.newBackend(t), "dog", lockConfig{prefix: p})
	if ok, err := other.TryLockContext(ctx); ok || err != nil {
		t.Fatalf("another owner acquired after 4 leases of holding: %v, %v", ok, err)
	}
	t.Logf("held for %v with a %v watchdog lease; smallest remaining lease %v", 4*leaseD, leaseD, least)

	must(t, m.UnlockContext(ctx), "unlock")
	within(t, s.bound(time.Second), done, "Done after unlock")
	key := k.key(p, "dog")
	// A renewal the scheduler had picked up before the release ended the
	// lease may still be on its way out (a descheduled goroutine, on a
	// loaded machine); it finds the hold gone. Only later calls count.
	time.Sleep(50 * time.Millisecond)
	before := sp.touched(key)
	time.Sleep(leaseD) // three renewal intervals
	if n := sp.touched(key) - before; n != 0 {
		t.Errorf("%d calls touched the key after Unlock; renewals must stop", n)
	}
}

func (s *suite) testFixedLease(t *testing.T, ctx context.Context, k lockKind) {
	const leaseD = 500 * time.Millisecond
	p := prefix()
	holder := k.open(s.newBackend(t), "fixed", lockConfig{prefix: p, fixed: leaseD})
	waiter := k.open(s.newBackend(t), "fixed", lockConfig{prefix: p})
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	start := time.Now()
	must(t, holder.LockContext(ctx), "lock")
	done := holder.Done(ctx)
	acquired := make(chan time.Duration, 1)
	go func() {
		if err := waiter.LockContext(ctx); err != nil {
			t.Error(err)
		}
		acquired <- time.Since(start)
	}()
	after := within(t, s.bound(5*time.Second), acquired, "waiter on an expiring hold")
	slow := trips.Stop()
	// The take-over is a few steps (the waiter's timer, its attempt's
	// round trip, the holder's expiry), each of which a loaded machine
	// may hold up: it allows for the longest stall three times, or for
	// all the stalls the meter saw, whichever is more.
	stalls := max(3*slow, trips.Stalled())
	if after < leaseD-50*time.Millisecond || after > leaseD+s.bound(100*time.Millisecond)+stalls {
		t.Errorf("waiter acquired %v after the hold began; want the lease %v (+100ms at most, and %v more: the longest round trip or stall timed meanwhile was %v, all stalls %v)", after, leaseD, stalls, slow, trips.Stalled())
	}
	within(t, s.bound(time.Second), done, "holder's Done after its lease expired")
	if err := holder.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock of an expired hold: %v, want ErrNotHeld", err)
	}
	t.Logf("waiter acquired %v after a %v fixed lease began (longest stall %v, all stalls %v)", after, leaseD, slow, trips.Stalled())
	must(t, waiter.UnlockContext(ctx), "waiter unlock")
}

func (s *suite) testLostSignal(t *testing.T, ctx context.Context, k lockKind) {
	const leaseD = time.Second
	p := prefix()
	b := s.newBackend(t)
	m := k.open(b, "lost", lockConfig{prefix: p, watchdog: leaseD})
	o := dsync.WithOwner(ctx)
	must(t, m.LockContext(o), "lock")
	done := m.Done(o)
	// The renewal that finds the hold gone is a round trip: the bound
	// allows twice the longest timed meanwhile (see withinTrips).
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	_, err := b.Eval(ctx, delScript, []string{k.key(p, "lost")})
	must(t, err, "DEL")
	deleted := time.Now()
	withinTrips(t, s.bound(leaseD/3+100*time.Millisecond), done, trips, "lost signal after DEL")
	trips.Stop()
	t.Logf("lost signal %v after DEL (renewal interval %v)", time.Since(deleted), leaseD/3)
	if _, err := m.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Token after loss: %v, want ErrNotHeld", err)
	}
	if err := m.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock after loss: %v, want ErrNotHeld", err)
	}
}

func (s *suite) testLostSignalScriptFlush(t *testing.T, ctx context.Context, k lockKind) {
	s.needHook(t, "FlushScripts", s.hooks.FlushScripts != nil)
	const leaseD = time.Second
	p := prefix()
	b := s.newBackend(t)
	m := k.open(b, "lost", lockConfig{prefix: p, watchdog: leaseD})
	must(t, m.LockContext(ctx), "lock")
	done := m.Done(ctx)
	must(t, s.hooks.FlushScripts(ctx), "SCRIPT FLUSH")
	// The renewal that finds the hold gone is a round trip, two with the
	// script loaded again: the bound allows twice the longest timed
	// meanwhile (see withinTrips).
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	_, err := b.Eval(ctx, delScript, []string{k.key(p, "lost")})
	must(t, err, "DEL")
	withinTrips(t, s.bound(leaseD/3+100*time.Millisecond), done, trips, "lost signal after SCRIPT FLUSH and DEL")
	if err := m.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock after loss: %v, want ErrNotHeld", err)
	}
	// Unlock() of a lost hold reports through the log, not a panic.
	must(t, m.LockContext(ctx), "lock again")
	_, err = b.Eval(ctx, delScript, []string{k.key(p, "lost")})
	must(t, err, "DEL")
	withinTrips(t, s.bound(leaseD/3+100*time.Millisecond), m.Done(ctx), trips, "second loss")
	trips.Stop()
	m.Unlock()
}

func (s *suite) testUnlockMisuse(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	b := s.newBackend(t)
	m := k.open(b, "misuse", lockConfig{prefix: p})
	a := dsync.WithOwner(ctx)
	must(t, m.LockContext(a), "lock")

	// Another owner, through the same handle or another, cannot unlock.
	intruder := dsync.WithOwner(ctx)
	if err := m.UnlockContext(intruder); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock by another owner: %v, want ErrNotHeld", err)
	}
	if err := k.open(s.newBackend(t), "misuse", lockConfig{prefix: p}).UnlockContext(intruder); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock by another owner on another backend: %v, want ErrNotHeld", err)
	}
	// Nor can the ownerless form, which refers to this handle's ownerless hold.
	if err := m.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("ownerless unlock of an owned hold: %v, want ErrNotHeld", err)
	}
	if n, err := m.HoldCount(a); err != nil || n != 1 {
		t.Fatalf("the hold after the intruders: count %d, %v; want 1", n, err)
	}
	must(t, m.UnlockContext(a), "unlock")
	if err := m.UnlockContext(a); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("double unlock: %v, want ErrNotHeld", err)
	}

	// Unlock of a never-locked mutex panics, as sync.Mutex does.
	fresh := k.open(b, "never", lockConfig{prefix: p})
	msg := func() (msg any) {
		defer func() { msg = recover() }()
		fresh.Unlock()
		return nil
	}()
	if s, _ := msg.(string); !strings.Contains(s, "unlock of unlocked") {
		t.Errorf("Unlock of a never-locked lock: recovered %v, want a panic saying so", msg)
	}
	// Double Unlock too.
	fresh.Lock()
	//lint:ignore SA2001 the lock is taken only to be unlocked twice
	fresh.Unlock()
	msg = func() (msg any) {
		defer func() { msg = recover() }()
		fresh.Unlock()
		return nil
	}()
	if msg == nil {
		t.Error("second Unlock did not panic")
	}
}

// testHandOff checks that a release in another process hands the mutex to
// a queued waiter through the backend's pub/sub: promptly, and without
// another round trip by the waiter (the wake-up carries the hold).
// Promptly is within 50ms, plus three times the longest of round trips to
// the server timed meanwhile: on a loaded machine the process
// or the server may wait for a CPU that long, at each of the release's
// round trip, the publication to the waiter's connection and the waiter's
// wake-up. A waiter that missed its wake-up waits for its heartbeat,
// seconds, whatever the round trips.
func (s *suite) testHandOff(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	probe := s.newBackend(t)
	holder := k.open(elsewhere{probe}, "handoff", lockConfig{prefix: p})
	sp := newSpy(s.newBackend(t))
	waiter := k.open(sp, "handoff", lockConfig{prefix: p})
	meter := s.newBackend(t)
	var worst time.Duration
	for round := 0; round < 10; round++ {
		must(t, holder.LockContext(ctx), "lock")
		held, err := holder.Token(ctx)
		must(t, err, "holder token")
		acquired := make(chan time.Time, 1)
		queued := make(chan struct{})
		var calls int
		go func() {
			before := sp.count()
			close(queued)
			if err := waiter.LockContext(ctx); err != nil {
				t.Error(err)
			}
			calls = sp.count() - before
			acquired <- time.Now()
		}()
		<-queued
		k.awaitQueued(t, ctx, probe, p, "handoff", 1)
		// Past the mutex's hand-off threshold (1ms by default): a release
		// hands the lock to a waiter that waited longer, and only wakes a
		// newer one to try (see mutex, "Two modes under contention").
		time.Sleep(10 * time.Millisecond)
		// Round trips timed meanwhile show how long the machine held up
		// any exchange with the server: the bound allows for that.
		trips := tripmeter.Start(t, ctx, meter)
		released := time.Now()
		must(t, holder.UnlockContext(ctx), "unlock")
		at := within(t, s.bound(5*time.Second), acquired, "waiter")
		slow := trips.Stop()
		d := at.Sub(released)
		worst = max(worst, d)
		if limit := s.bound(50*time.Millisecond) + loadAllowance(slow, trips); d > limit {
			t.Errorf("round %d: waiter acquired %v after the release, want within %v, and %v more for the longest round trip timed meanwhile, three times (or the meter's stalls, %v, if more, up to %v)", round, d, s.bound(50*time.Millisecond), slow, trips.Stalled(), stallAllowance)
		}
		// One attempt that registers the waiter; one more before it if
		// the channel was not subscribed yet. None after the wake-up.
		if calls < 1 || calls > 2 {
			t.Errorf("round %d: waiter made %d calls, want 1 or 2 and none after its wake-up", round, calls)
		}
		if token, err := waiter.Token(ctx); err != nil || token <= held {
			t.Errorf("round %d: handed token %d (%v), want above the holder's %d", round, token, err, held)
		}
		must(t, waiter.UnlockContext(ctx), "waiter unlock")
	}
	t.Logf("release to acquisition: worst %v in 10 rounds", worst)
}

func (s *suite) testWaitAcrossPubSubKill(t *testing.T, ctx context.Context, k lockKind) {
	s.needHook(t, "KillPubSub", s.hooks.KillPubSub != nil)
	p := prefix()
	probe := s.newBackend(t)
	// Every client as if in a process of its own: hand-offs go through
	// the pub/sub connections that are killed.
	holder := k.open(elsewhere{probe}, "kill", lockConfig{prefix: p})
	must(t, holder.LockContext(ctx), "lock")
	const waiters = 4
	acquired := make(chan time.Time, waiters)
	for i := 0; i < waiters; i++ {
		m := k.open(elsewhere{s.newBackend(t)}, "kill", lockConfig{prefix: p})
		go func() {
			if err := m.LockContext(ctx); err != nil {
				t.Error(err)
				acquired <- time.Time{}
				return
			}
			acquired <- time.Now()
			m.UnlockContext(ctx)
		}()
	}
	k.awaitQueued(t, ctx, probe, p, "kill", waiters)
	must(t, s.hooks.KillPubSub(ctx), "kill pub/sub clients")
	released := time.Now()
	must(t, holder.UnlockContext(ctx), "unlock")
	var last time.Time
	for i := 0; i < waiters; i++ {
		last = within(t, s.bound(5*time.Second), acquired, "waiter after the kill")
	}
	// Each waiter is handed the mutex in turn; the first must not have to
	// wait for a heartbeat, and neither must the rest.
	if d := last.Sub(released); d > s.bound(time.Second) {
		t.Errorf("all %d waiters acquired %v after the release, want within %v", waiters, d, s.bound(time.Second))
	}
	t.Logf("pub/sub killed mid-wait: %d waiters acquired within %v of the release", waiters, last.Sub(released))
}

func (s *suite) testForceUnlock(t *testing.T, ctx context.Context, k lockKind) {
	const leaseD = time.Second
	p := prefix()
	probe := s.newBackend(t)
	holder := k.open(probe, "force", lockConfig{prefix: p, watchdog: leaseD})
	admin := k.open(s.newBackend(t), "force", lockConfig{prefix: p})
	waiter := k.open(s.newBackend(t), "force", lockConfig{prefix: p})
	must(t, holder.LockContext(ctx), "lock")
	done := holder.Done(ctx)
	acquired := make(chan time.Time, 1)
	go func() {
		if err := waiter.LockContext(ctx); err != nil {
			t.Error(err)
		}
		acquired <- time.Now()
	}()
	k.awaitQueued(t, ctx, probe, p, "force", 1)
	forced := time.Now()
	ok, err := admin.ForceUnlock(ctx)
	must(t, err, "force unlock")
	if !ok {
		t.Error("ForceUnlock of a held mutex reported it free")
	}
	at := within(t, s.bound(5*time.Second), acquired, "waiter after ForceUnlock")
	if d := at.Sub(forced); d > s.bound(500*time.Millisecond) {
		t.Errorf("waiter acquired %v after ForceUnlock; it must be woken, not wait for a heartbeat", d)
	}
	within(t, s.bound(leaseD/3+100*time.Millisecond), done, "the forced-out holder's lost signal")
	must(t, waiter.UnlockContext(ctx), "waiter unlock")
	if ok, err := admin.ForceUnlock(ctx); ok || err != nil {
		t.Errorf("ForceUnlock of a free mutex: %v, %v", ok, err)
	}
}

func (s *suite) testFencingTokens(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	b := s.newBackend(t)
	ms := []exclusiveLock{
		k.open(b, "fence", lockConfig{prefix: p}),
		k.open(s.newBackend(t), "fence", lockConfig{prefix: p}),
	}
	var last int64
	for i := 0; i < 20; i++ {
		m := ms[i%2]
		o := dsync.WithOwner(ctx)
		must(t, m.LockContext(o), "lock %d", i)
		tok, err := m.Token(o)
		must(t, err, "token")
		if tok <= last {
			t.Fatalf("hold %d: token %d not above the previous %d", i, tok, last)
		}
		must(t, m.LockContext(o), "re-enter")
		if again, _ := m.Token(o); again != tok {
			t.Errorf("re-entry: token %d, want the same %d", again, tok)
		}
		must(t, m.UnlockContext(o), "unlock")
		must(t, m.UnlockContext(o), "unlock")
		last = tok
		if i == 9 {
			// The key that keeps the last token (the fence key) is lost:
			// tokens still increase, seeded from the server clock.
			ks := []string{k.key(p, "fence") + ":fence"}
			n, err := b.Eval(ctx, delScript, ks)
			must(t, err, "DEL the keys that keep the last token")
			if n != int64(len(ks)) {
				t.Fatalf("DEL %q: %v, want %d: the last token was not kept in each", ks, n, len(ks))
			}
		}
	}
	if _, err := ms[0].Token(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Token without a hold: %v, want ErrNotHeld", err)
	}
}

func (s *suite) testAmbiguousAcquire(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	sp := newSpy(s.newBackend(t))
	m := k.open(sp, "amb", lockConfig{prefix: p})
	o := dsync.WithOwner(ctx)

	// First acquisition and a re-entry, each with its reply lost once: the
	// retries must not count twice.
	for i := 1; i <= 2; i++ {
		sp.loseReplies(1)
		must(t, m.LockContext(o), "lock %d with a lost reply", i)
		if n, err := m.HoldCount(o); err != nil || n != i {
			t.Fatalf("after lock %d with a lost reply: HoldCount %d, %v; want %d", i, n, err, i)
		}
	}
	must(t, m.UnlockContext(o), "unlock")
	must(t, m.UnlockContext(o), "unlock")
	if locked, _ := m.IsLocked(ctx); locked {
		t.Fatal("still locked after as many unlocks as locks")
	}

	// A TryLock whose reply is lost reports the error and leaves nothing held.
	sp.loseReplies(1)
	if ok, err := m.TryLockContext(o); ok || err == nil {
		t.Fatalf("TryLock with a lost reply: %v, %v; want an error", ok, err)
	}
	if locked, _ := m.IsLocked(ctx); locked {
		t.Error("a TryLock that reported an error left the mutex held")
	}
}

func (s *suite) testAmbiguousRelease(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	sp := newSpy(s.newBackend(t))
	m := k.open(sp, "amb", lockConfig{prefix: p})
	o := dsync.WithOwner(ctx)
	for i := 0; i < 3; i++ {
		must(t, m.LockContext(o), "lock")
	}
	sp.loseReplies(1)
	must(t, m.UnlockContext(o), "unlock with a lost reply")
	if n, err := m.HoldCount(o); err != nil || n != 2 {
		t.Fatalf("after one unlock with a lost reply: HoldCount %d, %v; want 2", n, err)
	}
	must(t, m.UnlockContext(o), "unlock")
	sp.loseReplies(1)
	must(t, m.UnlockContext(o), "last unlock with a lost reply")
	if locked, _ := m.IsLocked(ctx); locked {
		t.Error("still locked after the last unlock")
	}
}

func (s *suite) testAbandonedWait(t *testing.T, ctx context.Context, k lockKind) {
	p := prefix()
	b := s.newBackend(t)
	holder := k.open(b, "abandon", lockConfig{prefix: p})
	must(t, holder.LockContext(ctx), "lock")
	// Waiters that give up leave nothing behind and do not swallow the
	// wake-up meant for a waiter that stays.
	for i := 0; i < 3; i++ {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := k.open(s.newBackend(t), "abandon", lockConfig{prefix: p}).LockContext(wctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiter %d: %v, want DeadlineExceeded", i, err)
		}
	}
	stayer := k.open(s.newBackend(t), "abandon", lockConfig{prefix: p})
	acquired := make(chan time.Time, 1)
	go func() {
		if err := stayer.LockContext(ctx); err != nil {
			t.Error(err)
		}
		acquired <- time.Now()
	}()
	k.awaitQueued(t, ctx, b, p, "abandon", 1)
	released := time.Now()
	must(t, holder.UnlockContext(ctx), "unlock")
	if d := within(t, s.bound(5*time.Second), acquired, "the waiter that stayed").Sub(released); d > s.bound(500*time.Millisecond) {
		t.Errorf("the waiter that stayed acquired %v after the release", d)
	}
	must(t, stayer.UnlockContext(ctx), "unlock")
	assertNoKeys(t, ctx, b, p, k.key(p, "abandon"), options.DefaultFenceTTL)
}

func (s *suite) testBadInput(t *testing.T, ctx context.Context, k lockKind) {
	sp := newSpy(s.newBackend(t))
	cases := []struct {
		name string
		m    exclusiveLock
		want error
	}{
		{"empty name", k.open(sp, "", lockConfig{}), dsync.ErrInvalidName},
		{"2 KiB name", k.open(sp, strings.Repeat("n", 2048), lockConfig{}), dsync.ErrInvalidName},
		{"zero lease", k.open(sp, "x", lockConfig{fixed: 0, setFixed: true}), dsync.ErrInvalidLease},
		{"negative lease", k.open(sp, "x", lockConfig{fixed: -time.Second}), dsync.ErrInvalidLease},
		{"negative watchdog", k.open(sp, "x", lockConfig{watchdog: -1}), dsync.ErrInvalidLease},
		{"bad prefix", k.open(sp, "x", lockConfig{prefix: "a{b"}), dsync.ErrInvalidName},
		{"nil backend", k.open(nil, "x", lockConfig{}), dsync.ErrInvalidBackend},
		{"zero value", k.zero(), dsync.ErrInvalidBackend},
	}
	for _, c := range cases {
		if err := c.m.LockContext(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: LockContext: %v, want %v", c.name, err, c.want)
		}
		if _, err := c.m.TryLockContext(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: TryLockContext: %v, want %v", c.name, err, c.want)
		}
		if err := c.m.UnlockContext(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: UnlockContext: %v, want %v", c.name, err, c.want)
		}
		if _, err := c.m.IsLocked(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: IsLocked: %v, want %v", c.name, err, c.want)
		}
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: Lock did not panic", c.name)
				}
			}()
			c.m.Lock()
		}()
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	m := k.open(sp, "x", lockConfig{prefix: prefix()})
	for op, err := range map[string]error{
		"lock":    m.LockContext(cctx),
		"trylock": second(m.TryLockContext(cctx)),
		"state":   second(m.IsLocked(cctx)),
	} {
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), op) || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("cancelled ctx: %s: %v, want context.Canceled naming the operation and the lock", op, err)
		}
	}
	if n := sp.count(); n != 0 {
		t.Errorf("bad input reached the server: %d calls", n)
	}
}

func second[T any](_ T, err error) error { return err }
