package fault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// Eviction as a fault class. A server with a small maxmemory evicts keys
// one at a time to make room, and a key of a held primitive may be the
// victim like any other (LRU is approximate, its clock coarse): its hold
// is then lost on the server, exactly as if the key had been deleted. What dsync promises under it is what it promises
// for a restart without persistence: the holder is told (Done, or its
// release fails with ErrNotHeld) by its next renewal, a later holder has a
// higher fencing token, and nothing is lost for good.
const (
	evictLease    = 600 * time.Millisecond
	evictWaiterTO = 900 * time.Millisecond
	evictClients  = 4
	evictCapacity = 3 // the semaphore's
	// evictTold bounds how long after its loss on the server a holder is
	// told: a renewal every third of the lease, plus its round trip and
	// the scheduling of a loaded 2-vCPU machine.
	evictTold = evictLease/3 + 200*time.Millisecond
)

// evictHold is one hold of the eviction workload.
type evictHold struct {
	client int
	write  bool  // exclusive: a mutex, fairlock or write hold
	n      int64 // permits, for the semaphore
	token  int64 // fencing token of an exclusive hold
	start  time.Time
	end    time.Time // the release sent, or the loss told, whichever first
	told   bool      // lost: Done closed before the release, or the release found it gone
	toldAt time.Time
}

// evictAcquisition is what a client of the workload holds.
type evictAcquisition struct {
	write   bool
	n       int64
	token   int64
	done    <-chan struct{}
	release func() error
}

// evictKind is one primitive under the workload: how a client acquires,
// which keys carry which holds, and how a fresh owner takes all of it.
type evictKind struct {
	kind    string
	carries func(suffix string, write bool) bool // whether the key with suffix carries a hold
	open    func(t *testing.T, addr, name string) (acquire func(ctx context.Context, rng *rand.Rand) (evictAcquisition, error), all func(ctx context.Context) (bool, error))
}

// loneRead matches the main key of a read-write lock that a lone reader
// holds, plain or full (see rwlock/lua/rw.lua).
var loneRead = regexp.MustCompile(`^[0-9a-f]+ [0-9a-f]+ r$|^[0-9]+ r [0-9]+ `)

// leftBehind returns the suffixes of the keys that an eviction of the main
// key of k's primitive may leave behind, and a test of the main key (read
// with c) that says it holds a lone hold beside them, which they do not
// carry (TestStaleHoldersCarryNoHold, TestStaleReadersCarryNoHold): a
// semaphore's holders beside its single form, a read-write lock's readers
// beside a lone reader's hold.
func (k evictKind) leftBehind() (suffixes []string, lone func(c redis.Conn, main string) bool) {
	switch k.kind {
	case "semaphore":
		return []string{":holders"}, func(c redis.Conn, main string) bool {
			typ, _ := redis.String(c.Do("TYPE", main))
			return typ == "string"
		}
	case "rwlock":
		return []string{":readers", ":rexpiry"}, func(c redis.Conn, main string) bool {
			v, _ := redis.String(c.Do("GET", main))
			return loneRead.MatchString(v)
		}
	}
	return nil, nil
}

// evictPrefixes returns the key prefixes of the primitive of kind and
// name: its own, or its members' for a multi-lock (see evictKinds).
func evictPrefixes(kind, name string) []string {
	if kind == "multilock" {
		return []string{"dsync:mutex:{" + name + "-a}", "dsync:mutex:{" + name + "-b}"}
	}
	return []string{"dsync:" + kind + ":{" + name + "}"}
}

func evictKinds() []evictKind {
	exclusive := func(suffix string, _ bool) bool { return suffix == "" }
	return []evictKind{
		{"mutex", exclusive, func(t *testing.T, addr, name string) (func(context.Context, *rand.Rand) (evictAcquisition, error), func(context.Context) (bool, error)) {
			opts := []mutex.Option{mutex.WithWatchdog(evictLease), mutex.WithLogger(nil)}
			m := mutex.New(newBackend(t, addr), name, opts...)
			return exclusiveAcquire(m), freeExclusive(mutex.New(newBackend(t, addr), name, opts...))
		}},
		{"fairlock", exclusive, func(t *testing.T, addr, name string) (func(context.Context, *rand.Rand) (evictAcquisition, error), func(context.Context) (bool, error)) {
			opts := []fairlock.Option{fairlock.WithWatchdog(evictLease), fairlock.WithWaiterTimeout(evictWaiterTO), fairlock.WithLogger(nil)}
			m := fairlock.New(newBackend(t, addr), name, opts...)
			return exclusiveAcquire(m), freeExclusive(fairlock.New(newBackend(t, addr), name, opts...))
		}},
		// Reads 3 times in 4.
		{"rwlock", func(suffix string, write bool) bool {
			if write {
				return suffix == ""
			}
			// A lone reader's hold is W itself, and the read holds in the
			// other keys are lost with W (see rwlock/lua/rw.lua).
			return suffix == "" || suffix == ":readers" || suffix == ":rexpiry"
		}, func(t *testing.T, addr, name string) (func(context.Context, *rand.Rand) (evictAcquisition, error), func(context.Context) (bool, error)) {
			opts := []rwlock.Option{rwlock.WithWatchdog(evictLease), rwlock.WithWaiterTimeout(evictWaiterTO), rwlock.WithLogger(nil)}
			m := rwlock.New(newBackend(t, addr), name, opts...)
			write := exclusiveAcquire(m)
			return func(ctx context.Context, rng *rand.Rand) (evictAcquisition, error) {
				if rng.IntN(4) == 0 {
					return write(ctx, rng)
				}
				o := dsync.WithOwner(ctx)
				if err := m.RLockContext(o); err != nil {
					return evictAcquisition{}, err
				}
				o = context.WithoutCancel(o)
				return evictAcquisition{done: m.RDone(o), release: func() error { return m.RUnlockContext(o) }}, nil
			}, freeExclusive(rwlock.New(newBackend(t, addr), name, opts...))
		}},
		// A candidate leads until it resigns; its term is the hold.
		{"election", exclusive, func(t *testing.T, addr, name string) (func(context.Context, *rand.Rand) (evictAcquisition, error), func(context.Context) (bool, error)) {
			opts := []election.Option{election.WithWatchdog(evictLease), election.WithWaiterTimeout(evictWaiterTO), election.WithLogger(nil)}
			e := election.New(newBackend(t, addr), name, opts...)
			fresh := election.New(newBackend(t, addr), name, opts...)
			return func(ctx context.Context, _ *rand.Rand) (evictAcquisition, error) {
					term, err := e.Campaign(ctx, "candidate")
					if err != nil {
						return evictAcquisition{}, err
					}
					token, err := term.Token(context.WithoutCancel(ctx))
					if err != nil {
						token = 0 // lost already: its Resign says so
					}
					return evictAcquisition{write: true, token: token, done: term.Done(), release: func() error { return term.Resign(context.Background()) }}, nil
				}, func(ctx context.Context) (bool, error) {
					term, ok, err := fresh.TryCampaign(ctx, "fresh")
					if ok {
						err = term.Resign(ctx)
					}
					return ok, err
				}
		}},
		// All of two mutexes: the loss of either loses the group.
		{"multilock", exclusive, func(t *testing.T, addr, name string) (func(context.Context, *rand.Rand) (evictAcquisition, error), func(context.Context) (bool, error)) {
			group := func() *multilock.Lock {
				opts := []mutex.Option{mutex.WithWatchdog(evictLease), mutex.WithLogger(nil)}
				b := newBackend(t, addr)
				return multilock.All(mutex.New(b, name+"-a", opts...), mutex.New(b, name+"-b", opts...))
			}
			g, fresh := group(), group()
			return func(ctx context.Context, _ *rand.Rand) (evictAcquisition, error) {
				o := dsync.WithOwner(ctx)
				if err := g.LockContext(o); err != nil {
					return evictAcquisition{}, err
				}
				o = context.WithoutCancel(o)
				var token int64
				if tokens, err := g.Tokens(o); err == nil {
					token = tokens[0]
				}
				return evictAcquisition{write: true, token: token, done: g.Done(o), release: func() error { return g.UnlockContext(o) }}, nil
			}, freeExclusive(fresh)
		}},
		// 1 or 2 permits at a time.
		{"semaphore", func(suffix string, _ bool) bool { return suffix == "" || suffix == ":holders" },
			func(t *testing.T, addr, name string) (func(context.Context, *rand.Rand) (evictAcquisition, error), func(context.Context) (bool, error)) {
				opts := []semaphore.Option{semaphore.WithWatchdog(evictLease), semaphore.WithWaiterTimeout(evictWaiterTO), semaphore.WithLogger(nil)}
				s := semaphore.New(newBackend(t, addr), name, evictCapacity, opts...)
				fresh := semaphore.New(newBackend(t, addr), name, evictCapacity, opts...)
				return func(ctx context.Context, rng *rand.Rand) (evictAcquisition, error) {
						n := 1 + rng.Int64N(2)
						o := dsync.WithOwner(ctx)
						if err := s.Acquire(o, n); err != nil {
							return evictAcquisition{}, err
						}
						o = context.WithoutCancel(o)
						return evictAcquisition{n: n, done: s.Done(o), release: func() error { return s.Release(o, n) }}, nil
					}, func(ctx context.Context) (bool, error) {
						o := dsync.WithOwner(ctx)
						ok, err := fresh.TryAcquire(o, evictCapacity)
						if ok {
							err = fresh.Release(o, evictCapacity)
						}
						return ok, err
					}
			}},
	}
}

// exclusiveAcquire is the acquisition of a client of an exclusive lock.
func exclusiveAcquire(m exclusiveLock) func(context.Context, *rand.Rand) (evictAcquisition, error) {
	return func(ctx context.Context, _ *rand.Rand) (evictAcquisition, error) {
		o := dsync.WithOwner(ctx)
		if err := m.LockContext(o); err != nil {
			return evictAcquisition{}, err
		}
		o = context.WithoutCancel(o)
		token, err := m.Token(o)
		if err != nil {
			token = 0 // lost already: its release says so
		}
		return evictAcquisition{write: true, token: token, done: m.Done(o), release: func() error { return m.UnlockContext(o) }}, nil
	}
}

// evictions records the keys a server evicts, with when the test heard of
// each, from its keyspace notifications.
type evictions struct {
	mu   sync.Mutex
	keys []evicted
}

type evicted struct {
	key string
	at  time.Time
	// lone is, for a key of probes, what its probe said of the server
	// when the eviction was heard.
	lone bool
}

// listen subscribes to the evictions of srv's database 0 and records them
// until the returned function is called. For an evicted key of probes it
// runs its probe at once, on a connection of its own.
func (e *evictions) listen(t *testing.T, addr string, probes map[string]func(redis.Conn) bool) (stop func()) {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := redis.Dial("tcp", addr)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	psc := redis.PubSubConn{Conn: c}
	if err := psc.Subscribe("__keyevent@0__:evicted"); err != nil {
		c.Close()
		probe.Close()
		t.Fatal(err)
	}
	ended := make(chan struct{})
	subscribed := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			switch v := psc.Receive().(type) {
			case redis.Message:
				ev := evicted{key: string(v.Data), at: time.Now()}
				if p, ok := probes[ev.key]; ok {
					ev.lone = p(probe)
				}
				e.mu.Lock()
				e.keys = append(e.keys, ev)
				e.mu.Unlock()
			case redis.Subscription:
				if v.Count == 1 {
					close(subscribed)
				}
			case error:
				return
			}
		}
	}()
	<-subscribed
	return func() {
		c.Close()
		<-ended
		probe.Close()
	}
}

// fill writes 4 KiB values under keys of its own, one every millisecond,
// with a TTL of a minute if ttl, until stop is closed; OOM errors (nothing
// left to evict) are ignored, as a cache's writer would.
func fill(t *testing.T, addr string, ttl bool, stop <-chan struct{}) (done <-chan int) {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan int, 1)
	value := strings.Repeat("x", 4096)
	go func() {
		defer c.Close()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		n := 0
		for ; n < 1e6; n++ {
			select {
			case <-stop:
				out <- n
				return
			case <-tick.C:
			}
			args := []any{"fill:" + strconv.Itoa(n), value}
			if ttl {
				args = append(args, "EX", 60)
			}
			if _, err := c.Do("SET", args...); err != nil && !strings.HasPrefix(err.Error(), "OOM") {
				out <- n
				return
			}
		}
		out <- n
	}()
	return out
}

// Eviction loses no hold silently. On a real redis-server with a small
// maxmemory (2 MiB above what it uses when the test starts) and keyspace
// notifications of evictions, filled by 4 KiB values written every
// millisecond, 4 clients per primitive take and give back holds of
// 50-350ms on 600ms watchdog leases for 3s, under allkeys-lru and
// volatile-lru (the values with a TTL, as a cache's, or without, so that
// the primitive's keys are the only ones volatile-lru may evict).
// Criteria:
//
//   - every loss is told: a hold one of whose keys was evicted (heard more
//     than 100ms after its acquisition returned, so that the eviction is
//     not one of the key's state before the grant, and before its release
//     was sent) is told, by Done closing or by its release failing with
//     ErrNotHeld, within a third of the lease plus 200ms of the eviction;
//     a key that an eviction of the main key left behind (a semaphore's
//     holders, a read-write lock's readers), evicted while the main key
//     held a lone hold, carries no hold for sure, and its eviction is
//     only counted;
//   - no overlap between lease-valid holders: a hold is valid from its
//     acquisition until its release is sent, and a hold told of a loss
//     only until that bound before it was told, since its key may have
//     been evicted then, after which the server no longer had it (as
//     after a restart without persistence). Valid exclusive holds never
//     overlap, and valid permits never exceed the capacity. The holds as
//     their holders saw them may overlap, by up to a renewal interval: the
//     longest such overlap is printed, and of two overlapping holds the
//     later has the higher fencing token, so that the resource refuses
//     the earlier;
//   - nothing is lost for good: once the limit is lifted, a fresh owner
//     takes all of the primitive (the lock, every permit) within a lease
//     and a heartbeat.
//
// It prints the evictions (all, and of the primitive's keys), the holds,
// the losses told (and those with no eviction of their keys, such as a
// lease run out under load) and how long after the eviction, and the
// overlaps of the holds as their holders saw them.
func TestEvictionLosesNoHoldSilently(t *testing.T) {
	testserver.Long(t, "every primitive under three eviction policies, about 25 s")
	// Each case has a server of its own and a light load (4 clients, a
	// write a millisecond), so a few run side by side: three, so that the
	// watchdogs' renewals keep well within the told-within bound under
	// -race beside another package's tests.
	slots := make(chan struct{}, 3)
	for _, v := range []struct {
		name, policy string
		ttl          bool // the filler's values have a TTL
	}{
		{"allkeys-lru", "allkeys-lru", false},
		// A cache beside the locks: its values expire too.
		{"volatile-lru", "volatile-lru", true},
		// Values without a TTL: the primitive's keys are the only ones
		// volatile-lru may evict, and once none is left the server
		// refuses writes (OOM) until one is made.
		{"volatile-lru-only-ours", "volatile-lru", false},
	} {
		for _, k := range evictKinds() {
			t.Run(v.name+"/"+k.kind, func(t *testing.T) {
				t.Parallel()
				slots <- struct{}{}
				defer func() { <-slots }()
				runEviction(t, v.name, v.policy, v.ttl, k)
			})
		}
	}
}

func runEviction(t *testing.T, variant, policy string, ttl bool, k evictKind) {
	srv := startServer(t, "--maxmemory-policy", policy, "--notify-keyspace-events", "Ee")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "evict"
	prefixes := evictPrefixes(k.kind, name)

	// The keys k.leftBehind names outlive an eviction of the main key,
	// and may meanwhile sit beside a lone hold, which they do not carry:
	// the listener reads the main key's form when it hears one evicted.
	probes := map[string]func(redis.Conn) bool{}
	suffixes, lone := k.leftBehind()
	for _, suffix := range suffixes {
		probes[prefixes[0]+suffix] = func(c redis.Conn) bool { return lone(c, prefixes[0]) }
	}
	var ev evictions
	stopListening := ev.listen(t, srv.Addr(), probes)
	defer stopListening()

	var (
		mu     sync.Mutex
		holds  []evictHold
		failed int
		errs   []error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var all func(context.Context) (bool, error)
	for c := range evictClients {
		acquire, free := k.open(t, srv.Addr(), name)
		all = free
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
				actx, acancel := context.WithTimeout(ctx, 2*time.Second)
				a, err := acquire(actx, rng)
				acancel()
				if err != nil {
					mu.Lock()
					failed++
					if !errors.Is(err, context.DeadlineExceeded) {
						errs = append(errs, err)
					}
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				h := evictHold{client: c, write: a.write, n: a.n, token: a.token, start: time.Now()}
				doneAt := make(chan time.Time, 1)
				go func() {
					<-a.done
					doneAt <- time.Now()
				}()
				select {
				case <-time.After(time.Duration(50+rng.IntN(300)) * time.Millisecond):
				case <-a.done:
				}
				sent := time.Now()
				err = a.release()
				var dt time.Time
				select {
				case dt = <-doneAt:
				case <-time.After(2 * time.Second):
					mu.Lock()
					errs = append(errs, fmt.Errorf("client %d: Done still open 2s after the release returned (%v)", c, err))
					mu.Unlock()
					return
				}
				switch {
				case dt.Before(sent):
					h.told, h.toldAt, h.end = true, dt, dt
				case errors.Is(err, dsync.ErrNotHeld):
					h.told, h.toldAt, h.end = true, time.Now(), sent
				case err != nil:
					mu.Lock()
					errs = append(errs, fmt.Errorf("client %d: release: %w", c, err))
					mu.Unlock()
					h.end = sent
				default:
					h.end = sent
				}
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
		}()
	}

	// Let the clients start, then limit the memory and fill it.
	time.Sleep(200 * time.Millisecond)
	info, err := redis.String(do(ctx, srv.Addr(), "INFO", "memory"))
	if err != nil {
		t.Fatal(err)
	}
	used := infoInt(info, "used_memory")
	if _, err := do(ctx, srv.Addr(), "CONFIG", "SET", "maxmemory", strconv.FormatInt(used+2<<20, 10)); err != nil {
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
	for i := 0; ; i++ {
		ok, err := all(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Since(start) > evictLease+evictWaiterTO/3+500*time.Millisecond || i == 1000 {
			t.Fatalf("a fresh owner cannot take all of the %s %v after the workload ended", k.kind, time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	freeAfter := time.Since(start)
	stopListening()

	info, err = redis.String(do(ctx, srv.Addr(), "INFO", "stats"))
	if err != nil {
		t.Fatal(err)
	}
	ev.mu.Lock()
	keys := slices.Clone(ev.keys)
	ev.mu.Unlock()
	mine := map[string]int{}
	var carrying []evicted // evictions of keys that carry holds, with their suffix in key
	for _, e := range keys {
		for _, prefix := range prefixes {
			if suffix, ok := strings.CutPrefix(e.key, prefix); ok {
				mine["key"+suffix]++
				carrying = append(carrying, evicted{key: suffix, at: e.at, lone: e.lone})
			}
		}
	}

	// Every loss told, within the bound.
	var told, hit, unexplained, stale int
	var slowest time.Duration
	for _, h := range holds {
		if h.told {
			told++
			if !slices.ContainsFunc(carrying, func(e evicted) bool {
				return k.carries(e.key, h.write) && e.at.After(h.start.Add(-100*time.Millisecond)) && !e.at.After(h.toldAt)
			}) {
				unexplained++ // its lease ran out under load, say
			}
		}
		for _, e := range carrying {
			if !k.carries(e.key, h.write) || e.at.Before(h.start.Add(100*time.Millisecond)) || !e.at.Before(h.end) {
				continue
			}
			if e.lone && !h.told {
				stale++ // it may have sat beside a single-form hold
				continue
			}
			hit++
			if !h.told {
				t.Errorf("client %d's hold (%v to %v) never told of the loss of key%s, evicted at %v",
					h.client, h.start.Format("05.000"), h.end.Format("05.000"), e.key, e.at.Format("05.000"))
			} else if d := h.toldAt.Sub(e.at); d > evictTold {
				t.Errorf("client %d told %v after key%s was evicted; want within %v", h.client, d, e.key, evictTold)
			} else {
				slowest = max(slowest, d)
			}
			break
		}
	}

	// No overlap between lease-valid holders; the later of two
	// overlapping exclusive holds has the higher token.
	valid := func(h evictHold) time.Time {
		if !h.told {
			return h.end
		}
		if e := h.toldAt.Add(-evictTold); e.After(h.start) {
			return e
		}
		return h.start
	}
	var overlaps, violations int
	var longest time.Duration
	for i, x := range holds {
		for j, y := range holds {
			if i == j || y.start.Before(x.start) || !y.start.Before(x.end) || !(x.write || y.write) || k.kind == "semaphore" {
				continue
			}
			overlaps++
			end := x.end
			if y.end.Before(end) {
				end = y.end
			}
			longest = max(longest, end.Sub(y.start))
			// A hold handed over and lost at once (its key evicted between
			// the hand-off and the waiter's wake-up, told within the
			// bound) never was lease-valid, and its token, granted before
			// the eviction, may be below that of a hold taken after it.
			yValid := y.start.Before(valid(y))
			if yValid && x.token > 0 && y.token > 0 && y.token <= x.token {
				t.Errorf("client %d's hold from %v has token %d, not above the overlapping earlier hold's %d", y.client, y.start.Format("05.000"), y.token, x.token)
			}
			if yValid && y.start.Before(valid(x)) {
				violations++
				t.Errorf("client %d's hold (%v to %v, told %v) and client %d's (%v to %v, told %v) overlap while both lease-valid",
					x.client, x.start.Format("05.000"), x.end.Format("05.000"), x.told, y.client, y.start.Format("05.000"), y.end.Format("05.000"), y.told)
			}
		}
	}
	if k.kind == "semaphore" {
		overlaps, violations, longest = permitsOver(holds, valid)
		if violations > 0 {
			t.Errorf("more than %d lease-valid permits held at once, %d times", evictCapacity, violations)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range errs {
		t.Errorf("%v", err)
	}
	t.Logf("%s (%s), %s: %d values written, %s evictions, %d of the %s's keys %v; %d holds (%d acquisitions failed), %d told of a loss (%d with no eviction of their keys), %d hit by an eviction during the hold (and %d untold, by one of a key left behind beside a lone hold), told within %v of it at worst; overlaps %d (longest %v), %d while both lease-valid; all of it free %v after the end",
		variant, policy, k.kind, written, infoValue(info, "evicted_keys"), len(carrying), k.kind, mine, len(holds), failed, told, unexplained, hit, stale,
		slowest.Round(time.Millisecond), overlaps, longest.Round(time.Millisecond), violations, freeAfter.Round(time.Millisecond))
}

// permitsOver sweeps the semaphore's holds: how many times more than the
// capacity was held at once (by the holds as sent and released), and how
// many times by lease-valid holds, with the longest excess.
func permitsOver(holds []evictHold, valid func(evictHold) time.Time) (over, violations int, longest time.Duration) {
	type edge struct {
		at time.Time
		n  int64
	}
	sweep := func(end func(evictHold) time.Time) (count int, longest time.Duration) {
		var es []edge
		for _, h := range holds {
			if e := end(h); e.After(h.start) {
				es = append(es, edge{h.start, h.n}, edge{e, -h.n})
			}
		}
		slices.SortFunc(es, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return int(a.n - b.n) // releases first at equal times
		})
		var held int64
		var since time.Time
		for _, e := range es {
			was := held
			held += e.n
			if was <= evictCapacity && held > evictCapacity {
				count++
				since = e.at
			} else if was > evictCapacity && held <= evictCapacity {
				longest = max(longest, e.at.Sub(since))
			}
		}
		return count, longest
	}
	over, longest = sweep(func(h evictHold) time.Time { return h.end })
	violations, _ = sweep(valid)
	return over, violations, longest
}

// infoValue returns the value of field in an INFO reply.
func infoValue(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

func infoInt(info, field string) int64 {
	n, _ := strconv.ParseInt(infoValue(info, field), 10, 64)
	return n
}
