package fault

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/waitgroup"
)

// Eviction loses no unit of a wait group silently, and is never taken for
// a count of 0. As TestEvictionLosesNoHoldSilently does for the locks, on
// a real redis-server with a small maxmemory filled by 4 KiB values under
// three eviction policies: 4 workers add a unit each (a handle of their
// own, on a 600ms watchdog lease), hold it 50-350ms and count it down,
// and 2 clients wait (2s at most), for 3s. Criteria:
//
//   - a Wait that returned nil saw the count at 0: some instant of its call
//     had no unit surely pending (from its Add's reply until its Done was
//     sent, or, for a unit whose Done failed, an eviction of the group's
//     keys began);
//   - a Wait that returned ErrVanished came with an eviction of the group's
//     keys while it waited;
//   - every unit whose count (the group's hash) was evicted while it was
//     pending (heard more than 100ms after its Add returned, before its
//     Done was sent) is told: its Done fails with ErrNotHeld, rather than
//     count down a unit the server no longer has;
//   - nothing is lost for good: once the limit is lifted, a Wait returns
//     nil within a lease and a waiter timeout (abandoned errors before it
//     are allowed: they end with the count).
//
// It prints the evictions of the group's keys, the units, the waits by
// outcome and the losses told.
func TestEvictionWaitGroup(t *testing.T) {
	testserver.Long(t, "the wait group under three eviction policies, about 4 s")
	for _, v := range []struct {
		name, policy string
		ttl          bool
	}{
		{"allkeys-lru", "allkeys-lru", false},
		{"volatile-lru", "volatile-lru", true},
		{"volatile-lru-only-ours", "volatile-lru", false},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel() // a server of its own each, as TestEvictionLosesNoHoldSilently's
			runEvictionWaitGroup(t, v.policy, v.ttl)
		})
	}
}

const debugEvict = false

type evictUnit struct {
	call, from time.Time // Add sent, and returned
	done       time.Time // Done sent
	err        error     // Done's
}

type evictWait struct {
	call, ret time.Time
	err       error
}

func runEvictionWaitGroup(t *testing.T, policy string, ttl bool) {
	srv := startServer(t, "--maxmemory-policy", policy, "--notify-keyspace-events", "Ee")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const prefix = "dsync:waitgroup:{evict}"
	opts := []waitgroup.Option{waitgroup.WithWatchdog(evictLease), waitgroup.WithWaiterTimeout(evictWaiterTO), waitgroup.WithLogger(nil)}

	var ev evictions
	stopListening := ev.listen(t, srv.Addr(), nil)
	defer stopListening()

	var (
		mu    sync.Mutex
		units []evictUnit
		waits []evictWait
		errs  []error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 6 {
		b := newBackend(t, srv.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				g := waitgroup.New(b, "evict", opts...)
				actx, acancel := context.WithTimeout(ctx, 2*time.Second)
				if c >= 4 { // a waiter
					w := evictWait{call: time.Now()}
					w.err = g.Wait(actx)
					w.ret = time.Now()
					acancel()
					mu.Lock()
					waits = append(waits, w)
					mu.Unlock()
					continue
				}
				u := evictUnit{call: time.Now()}
				err := g.Add(actx, 1)
				acancel()
				if err != nil {
					// Under volatile-lru with nothing volatile left, the
					// server refuses writes (OOM) until some memory is free.
					if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "OOM") {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				u.from = time.Now()
				time.Sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond)
				u.done = time.Now()
				u.err = g.Done(ctx)
				if u.err != nil && !errors.Is(u.err, dsync.ErrNotHeld) {
					mu.Lock()
					errs = append(errs, u.err)
					mu.Unlock()
				}
				mu.Lock()
				units = append(units, u)
				mu.Unlock()
			}
		}()
	}

	time.Sleep(200 * time.Millisecond)
	info, err := redis.String(do(ctx, srv.Addr(), "INFO", "memory"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := do(ctx, srv.Addr(), "CONFIG", "SET", "maxmemory", strconv.FormatInt(infoInt(info, "used_memory")+2<<20, 10)); err != nil {
		t.Fatal(err)
	}
	stopFill := make(chan struct{})
	filled := fill(t, srv.Addr(), ttl, stopFill)
	time.Sleep(3 * time.Second) // the workload runs for this long: time is what is tested
	close(stopFill)
	written := <-filled
	close(stop)
	wg.Wait()
	if _, err := do(ctx, srv.Addr(), "CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}

	// Nothing lost for good.
	start := time.Now()
	g := waitgroup.New(newBackend(t, srv.Addr()), "evict", opts...)
	for err := errors.New("not yet"); err != nil; {
		wctx, wcancel := context.WithTimeout(ctx, evictLease+evictWaiterTO+time.Second)
		err = g.Wait(wctx)
		wcancel()
		if err != nil && !errors.Is(err, dsync.ErrAbandoned) && !errors.Is(err, waitgroup.ErrVanished) {
			t.Fatalf("a Wait %v after the workload ended: %v", time.Since(start), err)
		}
	}
	emptyAfter := time.Since(start)
	stopListening()

	ev.mu.Lock()
	var ours []evicted
	for _, e := range ev.keys {
		if strings.HasPrefix(e.key, prefix) {
			ours = append(ours, evicted{key: strings.TrimPrefix(e.key, prefix), at: e.at})
		}
	}
	total := len(ev.keys)
	ev.mu.Unlock()

	// Every unit whose count was evicted while it was pending is told.
	var hit, told int
	for _, u := range units {
		if u.err != nil {
			told++
		}
		if slices.ContainsFunc(ours, func(e evicted) bool {
			return e.key == "" && e.at.After(u.from.Add(100*time.Millisecond)) && e.at.Before(u.done)
		}) {
			hit++
			if !errors.Is(u.err, dsync.ErrNotHeld) {
				t.Errorf("a unit (%v to %v) whose count was evicted meanwhile was counted down: Done = %v",
					u.from.Format("05.000"), u.done.Format("05.000"), u.err)
			}
		}
	}
	// Waits that returned nil saw the count at 0; ErrVanished came with an
	// eviction.
	type span struct{ from, until time.Time }
	var pending []span
	for _, u := range units {
		// A unit whose Done failed was lost to an eviction heard after
		// its Add was sent (its entry may have gone before the Add's
		// reply came), which took place up to 100ms before it was heard.
		end := u.done
		if u.err != nil {
			for _, e := range ours {
				if e.at.Before(end) && e.at.After(u.call) {
					end = e.at.Add(-100 * time.Millisecond)
				}
			}
		}
		if end.After(u.from) {
			pending = append(pending, span{u.from, end})
		}
	}
	slices.SortFunc(pending, func(a, b span) int { return a.from.Compare(b.from) })
	outcomes := map[string]int{}
	for _, w := range waits {
		switch {
		case w.err == nil:
			outcomes["nil"]++
			covered := w.call
			for _, s := range pending {
				if s.from.After(covered) {
					break
				}
				if s.until.After(covered) {
					covered = s.until
				}
			}
			if !covered.Before(w.ret) {
				t.Errorf("a Wait (%v to %v) returned nil while units were pending throughout", w.call.Format("05.000"), w.ret.Format("05.000"))
				if debugEvict {
					for _, u := range units {
						if u.from.Before(w.ret) && u.done.After(w.call) {
							t.Logf("  unit %v-%v done %v: %v", u.call.Format("05.000"), u.from.Format("05.000"), u.done.Format("05.000"), u.err)
						}
					}
					for _, e := range ours {
						t.Logf("  evicted key%s at %v", e.key, e.at.Format("05.000"))
					}
				}
			}
		case errors.Is(w.err, waitgroup.ErrVanished):
			outcomes["vanished"]++
			if !slices.ContainsFunc(ours, func(e evicted) bool { return !e.at.Before(w.call) && !e.at.After(w.ret) }) {
				t.Errorf("a Wait (%v to %v) returned ErrVanished with no eviction of the group's keys meanwhile", w.call.Format("05.000"), w.ret.Format("05.000"))
			}
		case errors.Is(w.err, dsync.ErrAbandoned):
			outcomes["abandoned"]++
		case errors.Is(w.err, context.DeadlineExceeded):
			outcomes["deadline"]++
		default:
			errs = append(errs, w.err)
		}
	}
	for _, err := range errs {
		t.Errorf("%v", err)
	}
	bySuffix := map[string]int{}
	for _, e := range ours {
		bySuffix["key"+e.key]++
	}
	t.Logf("%s: %d values written, %d evictions, %d of the group's keys %v; %d units, %d whose count was evicted while pending, %d Done told of a loss; waits %v; a Wait returned nil %v after the end",
		policy, written, total, len(ours), bySuffix, len(units), hit, told, outcomes, emptyAfter.Round(time.Millisecond))
	if len(waits) == 0 || len(units) == 0 {
		t.Error("the workload did not run")
	}
}
