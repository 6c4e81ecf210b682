package fault

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/internal/testserver"
)

var (
	soakFor  = flag.Duration("soak", time.Minute, "how long TestNemesisSoak runs")
	soakSeed = flag.Uint64("seed", 0, "the nemesis schedule of TestNemesisSoak (0: a fresh one, printed)")
)

// The nemesis soak: every primitive at once, side by side under the same
// faults. Client processes, in groups of one primitive each (soakGroups),
// loop on their primitive:
//
//   - mutex, fairlock, multilock (All over a mutex and an rwlock's write
//     side on one lock server and a fairlock on a second), and rwlock one
//     time in three: lock, read their group's register under the fencing
//     token (see register), write the value plus one under the same token,
//     unlock. One hold in three is re-entered by its owner before the read
//     and left again (one unlock) before the write, which must not release
//     it;
//   - rwlock, two times in three: a read hold, re-entered one time in
//     three, kept a few milliseconds so that readers overlap;
//   - watchdog: a mutex with a watchdog lease (renewed), held for up to a
//     lease before the read-modify-write, whose clients say when its Done
//     closes; such a hold is valid until then, or until its unlock, its
//     client's kill, or a lease after the last renewal its client sent
//     before it was paused (SIGSTOP; the clients report their renewals
//     through an observe.Observer). They read and write even after a
//     loss: the register's fence must refuse them;
//   - semaphore: capacity 3; n permits (1 to 3) for a fresh owner, and one
//     time in three m more for the same owner (TryAcquire), given back m
//     then n;
//   - permits: portable permits of a semaphore of capacity 3, each
//     acquired by one client and released by id by whichever client takes
//     it next from a list on the register server, one in three extended
//     first; one acquisition in four an owner's (see soakpermits_test.go);
//   - waitgroup: a unit added and counted down after 0-200ms, or a Wait
//     (see soakwaitgroup_test.go);
//   - election: campaign (with a ctx of 3s), lead a few milliseconds for
//     the fenced read-modify-write under the term's token, and resign. One
//     term in sixteen is renewed across a lease or more first, as the
//     watchdog group's holds are (terms are renewed, and checked as they
//     are); one in sixteen is on a fixed lease, left to run out (its Done
//     closes), and resigned after that one time in two.
//
// Each client reaches each lock server through a proxy of its own.
// Meanwhile a nemesis, driven by a seeded random schedule, partitions,
// slows and drops the replies of clients, stalls, pauses and restarts a
// lock server (kill -9, with appendfsync always), kills its pub/sub
// connections, makes it evict keys (a burst of filler values under a small
// maxmemory, allkeys-lru), and pauses and kills clients (a killed client is
// replaced). Holds have a fixed lease (but the watchdog group's and the
// election's renewed terms), so that each hold's validity is known from
// its acquisition: from its reply until its unlock was sent, or its lease
// less the margin ran out, or an eviction of a key that carries it began.
//
// Checked at the end, per group: no two lease-valid holds of different
// clients overlap (read holds may overlap each other, never a write hold),
// and never more than 3 lease-valid permits are held (portable ones
// included); a Wait that returns nil saw the count at 0, the abandoned
// error only after a unit could have been abandoned, ErrVanished only with
// an eviction; the register's value
// equals its accepted writes (no fenced update lost); the history of
// acquisitions, re-entries, unlocks and expiries is linearizable for the
// group's model (porcupine): an owner-aware, reentrant mutex whose tokens
// increase (and stay the same on re-entry), a read-write lock, a semaphore
// of acquired permits; and the history of register operations for a
// fenced register; and a term's fencing token is above those of the terms
// won before its campaign began. And a fresh owner takes all of each
// primitive (the lock, every permit, the election) within a lease and a
// waiter timeout of the end: nothing is lost for good.
//
// -soak=10m (with -timeout=30m) runs it longer; -seed=N replays a
// schedule. The histories stay in memory for the check: under -race the
// process grew by about 1.2 GiB a minute of soak (6 GiB at the end of
// -soak=4m), and -soak=12m ran out of a 24 GiB machine in its check.
func TestNemesisSoak(t *testing.T) {
	testserver.Long(t, "the nemesis soak, a minute or -soak")
	var groups []soakGroup
	for _, g := range soakGroups() {
		if !g.broken {
			groups = append(groups, g)
		}
	}
	for _, r := range runSoak(t, groups, *soakFor, *soakSeed, true) {
		for _, p := range r.problems {
			t.Error(p)
		}
	}
}

// soakLease is the fixed lease of the soak's holds, and the watchdog's.
const soakLease = time.Second

// soakNemesis are the faults of the soak's nemesis.
var soakNemesis = []string{"partition", "latency", "lost-replies", "stall", "pause-server", "restart", "kill-pubsub", "pause-client", "kill-client", "evict"}

// runSoak runs groups side by side under the nemesis for d, with the
// schedule of seed (0: a fresh one), checks them, logs each group's report
// and the counts, and returns the reports by group. A failure of the
// harness fails t; what the checkers find is only returned, and, with
// keep, the history of a group with violations is written to a file
// (which TestSoakReplay reads).
func runSoak(t *testing.T, groups []soakGroup, d time.Duration, seed uint64, keep bool) map[string]soakReport {
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("nemesis seed %d (replay with -seed=%d), %v", seed, seed, d)
	rng := rand.New(rand.NewPCG(seed, seed))

	nservers := 1
	for _, g := range groups {
		nservers = max(nservers, g.servers)
	}
	var servers []*harness.Server
	for range nservers {
		servers = append(servers, startServer(t, "--appendonly", "yes", "--appendfsync", "always",
			"--maxmemory-policy", "allkeys-lru", "--notify-keyspace-events", "Ee"))
	}
	regSrv := startServer(t)
	deadline := time.Now().Add(d)

	type client struct {
		id    int
		group string
		px    []*faultProxy // one per server of its group
		c     *child
	}
	var (
		mu      sync.Mutex
		events  = map[string][]soakEvent{}
		clients []*client
		readers sync.WaitGroup
		nextID  int
	)
	spawn := func(g string, px []*faultProxy) *client {
		mu.Lock()
		id := nextID
		nextID++
		mu.Unlock()
		c := &client{id: id, group: g, px: px}
		args := []string{"soak", g, strconv.Itoa(id), soakLease.String(), strconv.FormatInt(deadline.UnixNano(), 10), regSrv.Addr()}
		for _, p := range px {
			args = append(args, p.Addr())
		}
		c.c = startChild(t, args...)
		readers.Add(1)
		go func() {
			defer readers.Done()
			for line := range c.c.lines {
				e, err := parseSoakEvent(line)
				if err != nil {
					t.Errorf("client %d: %v", id, err)
					continue
				}
				mu.Lock()
				events[e.group] = append(events[e.group], e)
				mu.Unlock()
			}
		}()
		return c
	}
	for _, g := range groups {
		for range g.clients {
			var px []*faultProxy
			for i := range max(g.servers, 1) {
				px = append(px, newProxy(t, servers[i].Addr()))
			}
			clients = append(clients, spawn(g.name, px))
		}
	}

	// note records, for the checker, when a client was paused or killed
	// (a watchdog hold's validity is bounded by them), or when keys of a
	// group were evicted.
	note := func(e soakEvent) {
		mu.Lock()
		events[e.group] = append(events[e.group], e)
		mu.Unlock()
	}
	faults := map[string]int{}
	var evictedKeys, carrying int
	touched := map[string]int{} // faults that touched each group: on its clients, servers, or keys
	for time.Now().Add(3 * time.Second).Before(deadline) {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		d := time.Duration(300+rng.IntN(1200)) * time.Millisecond
		c := clients[rng.IntN(len(clients))]
		kind := soakNemesis[rng.IntN(len(soakNemesis))]
		si := 0 // the server of a server fault: the second one time in four
		if s := rng.IntN(4); s == 0 && nservers > 1 {
			si = 1
		}
		srv := servers[si]
		px := c.px // the proxies of a network fault: all of the client's, or one
		if w := rng.IntN(3); w > 0 && len(px) > 1 {
			px = px[w-1 : w]
		}
		faults[kind]++
		target := fmt.Sprintf("client %d (%s)", c.id, c.group)
		switch kind {
		case "stall", "pause-server", "restart", "kill-pubsub", "evict":
			target = fmt.Sprintf("server %d", si)
			for _, g := range groups {
				if si < max(g.servers, 1) && kind != "evict" {
					touched[g.name]++
				}
			}
		default:
			touched[c.group]++
		}
		t.Logf("%s nemesis: %s (%s, %v)", time.Now().Format("15:04:05.000"), kind, target, d)
		switch kind {
		case "partition":
			for _, p := range px {
				p.Partition(t)
			}
			time.Sleep(d)
			for _, p := range px {
				p.Heal(t)
			}
		case "latency":
			var ends []func()
			for _, p := range px {
				ends = append(ends, p.Latency(t, 100*time.Millisecond))
			}
			time.Sleep(d)
			for _, end := range ends {
				end()
			}
		case "lost-replies":
			for _, p := range px {
				p.DropReplies(t)
			}
			time.Sleep(d)
			for _, p := range px {
				p.RestoreReplies(t)
				p.Reset(t) // ends the calls whose replies were dropped
			}
		case "stall":
			pauseServer(t, srv, "DEBUG SLEEP", d)()
		case "pause-server":
			pauseServer(t, srv, "SIGSTOP", d)()
		case "restart":
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := srv.Node().Restart(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		case "kill-pubsub":
			do(context.Background(), srv.Addr(), "CLIENT", "KILL", "TYPE", "pubsub")
		case "pause-client":
			// Noted once stopped: every renewal the client sent before
			// the pause is then before the note.
			c.c.signal(t, syscall.SIGSTOP)
			note(soakEvent{kind: "paused", group: c.group, client: c.id, call: time.Now().UnixNano()})
			time.Sleep(d)
			c.c.signal(t, syscall.SIGCONT)
		case "kill-client":
			note(soakEvent{kind: "killed", group: c.group, client: c.id, call: time.Now().UnixNano()})
			c.c.kill()
			i := slices.Index(clients, c)
			clients[i] = spawn(c.group, c.px)
		case "evict":
			start, keys, err := evictBurst(srv.Addr(), d)
			if err != nil {
				t.Fatalf("eviction: %v", err)
			}
			evictedKeys += len(keys)
			// A key that carries a group's holds evicted: its holds may
			// have ended at any time from the burst's start until the
			// eviction was heard.
			var burst int
			for _, g := range groups {
				var n int
				var last time.Time
				for _, k := range keys {
					if g.carried(k.key) {
						n++
						last = k.at
					}
				}
				if n > 0 {
					burst += n
					touched[g.name]++
					note(soakEvent{kind: "evicted", group: g.name, client: -1, call: start.UnixNano(), ret: last.UnixNano(), value: int64(n)})
				}
			}
			carrying += burst
			t.Logf("%s nemesis: evicted %d keys of the primitives, %d carrying holds", time.Now().Format("15:04:05.000"), len(keys), burst)
		}
	}
	for _, c := range clients {
		if err := c.c.wait(); err != nil {
			t.Errorf("client %d: %v", c.id, err)
		}
	}
	readers.Wait()
	total := 0
	for _, n := range faults {
		total += n
	}
	t.Logf("faults injected: %d %v; keys of the primitives evicted %d, carrying holds %d", total, faults, evictedKeys, carrying)

	// Nothing lost for good: a fresh owner takes all of each primitive,
	// within a lease and a waiter timeout (a killed waiter's place lasts
	// that long past its last beat).
	freed := map[string]string{}
	var wg sync.WaitGroup
	for _, g := range groups {
		var bs []backend.Backend
		for i := range max(g.servers, 1) {
			bs = append(bs, newBackend(t, servers[i].Addr()))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			const bound = soakLease + 5*time.Second + time.Second
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			start := time.Now()
			err := g.free(ctx, bs)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				freed[g.name] = fmt.Sprintf("NOT taken by a fresh owner within %v: %v", bound, err)
				for i := range max(g.servers, 1) {
					t.Logf("%s: server %d's keys once the fresh owner failed:\n%s", g.name, i, dumpKeys(servers[i].Addr()))
				}
			} else {
				freed[g.name] = fmt.Sprintf("all of it taken by a fresh owner %v after the end", time.Since(start).Round(time.Millisecond))
			}
		}()
	}
	wg.Wait()

	reports := map[string]soakReport{}
	var ops, violations int
	for _, g := range groups {
		ge := events[g.name]
		var value, writes int64
		if g.register {
			reg := register{addr: regSrv.Addr(), key: "register:" + g.name}
			var err error
			if value, writes, err = reg.Totals(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		checking := time.Now()
		r := g.check(ge, soakLease, value, writes)
		checked := time.Since(checking).Round(time.Millisecond)
		if strings.HasPrefix(freed[g.name], "NOT") {
			r.fail("%s: %s", g.name, freed[g.name])
		}
		n := soakOperations(ge)
		ops += n
		violations += len(r.problems)
		t.Logf("%s\n\t%s: %d operations, %d faults on its clients, servers or keys, %d violations (checked in %v); %s",
			r, g.name, n, touched[g.name], len(r.problems), checked, freed[g.name])
		if len(r.problems) > 0 && keep {
			f, err := os.CreateTemp("", "dsync-soak-"+g.name+"-*.log")
			if err == nil {
				for _, e := range ge {
					fmt.Fprintln(f, time.Unix(0, e.call).Format("15:04:05.000000"), e)
				}
				f.Close()
				t.Logf("%s: the history is in %s", g.name, f.Name())
			}
		}
		reports[g.name] = r
	}
	t.Logf("soak: %d groups (%s), %d operations, %d faults %v, %d violations",
		len(groups), strings.Join(slices.Sorted(maps.Keys(reports)), ", "), ops, total, faults, violations)
	return reports
}

// soakOperations counts the operations a group's clients completed.
func soakOperations(events []soakEvent) int {
	n := 0
	for _, e := range events {
		switch e.kind {
		case "acq", "enter", "leave", "rel", "read", "write", "fail", "racq", "renter", "rleave", "rrel", "rfail", "extend", "add", "done", "wait":
			n++
		}
	}
	return n
}

// evictBurst makes the server at addr evict keys, as a server shared with
// a cache does when it is full: it sets maxmemory 256 KiB above what the
// server uses (its policy is allkeys-lru), writes 1 KiB values into
// database 1 for d, then lifts the limit and drops the values. It returns
// when the burst began, and the keys of database 0 (the primitives') that
// the server evicted, each with when it was heard: it was evicted between
// the burst's start and then.
func evictBurst(addr string, d time.Duration) (start time.Time, keys []evicted, err error) {
	sub, err := redis.Dial("tcp", addr, redis.DialReadTimeout(10*time.Second))
	if err != nil {
		return start, nil, err
	}
	psc := redis.PubSubConn{Conn: sub}
	defer psc.Close()
	if err := psc.Subscribe("__keyevent@0__:evicted"); err != nil {
		return start, nil, err
	}
	for subscribed := false; !subscribed; {
		switch v := psc.Receive().(type) {
		case redis.Subscription:
			subscribed = true
		case error:
			return start, nil, v
		}
	}
	c, err := redis.Dial("tcp", addr, redis.DialDatabase(1), redis.DialReadTimeout(10*time.Second))
	if err != nil {
		return start, nil, err
	}
	defer c.Close()
	info, err := redis.String(c.Do("INFO", "memory"))
	if err != nil {
		return start, nil, err
	}
	if _, err := c.Do("CONFIG", "SET", "maxmemory", strconv.FormatInt(infoInt(info, "used_memory")+256<<10, 10)); err != nil {
		return start, nil, err
	}
	start = time.Now()
	value := strings.Repeat("x", 1024)
	for i := 0; time.Since(start) < d && i < 1e6; {
		for range 8 {
			c.Send("SET", "fill:"+strconv.Itoa(i), value)
			i++
		}
		if err := c.Flush(); err != nil {
			return start, nil, err
		}
		for range 8 {
			if _, err := c.Receive(); err != nil && !strings.HasPrefix(err.Error(), "OOM") {
				return start, nil, err
			}
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Do("CONFIG", "SET", "maxmemory", "0"); err != nil {
		return start, nil, err
	}
	if _, err := c.Do("FLUSHDB", "ASYNC"); err != nil {
		return start, nil, err
	}
	// Every eviction was published before the limit was lifted: they all
	// come before the reply to this PING.
	if err := psc.Ping("end"); err != nil {
		return start, nil, err
	}
	for {
		switch v := psc.Receive().(type) {
		case redis.Message:
			keys = append(keys, evicted{key: string(v.Data), at: time.Now()})
		case redis.Pong:
			return start, keys, nil
		case error:
			return start, nil, v
		}
	}
}

// soakEvent is one line of a soak client's report, or a note of the
// parent's (paused, killed, evicted).
type soakEvent struct {
	kind   string // acq, rel, read, write, fail, ...; rel?, read?, write?: under way
	group  string
	client int
	token  int64
	call   int64 // ns since the epoch
	ret    int64
	ok     bool  // rel: released; read, write: accepted
	known  bool  // rel, read, write: the outcome is known
	value  int64 // read: the value read; write: the value written; semaphore: permits
}

func (e soakEvent) String() string {
	return fmt.Sprintf("%s %s %d %d %d %d %v %v %d", e.kind, e.group, e.client, e.token, e.call, e.ret, e.ok, e.known, e.value)
}

func parseSoakEvent(line string) (soakEvent, error) {
	var e soakEvent
	_, err := fmt.Sscan(line, &e.kind, &e.group, &e.client, &e.token, &e.call, &e.ret, &e.ok, &e.known, &e.value)
	if err != nil {
		return e, fmt.Errorf("bad event %q: %v", line, err)
	}
	return e, nil
}

// dumpKeys returns every key of the server at addr with its type, PTTL and
// value, one per line: what a failed soak leaves to read.
func dumpKeys(addr string) string {
	c, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(time.Second), redis.DialReadTimeout(time.Second))
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	keys, err := redis.Strings(c.Do("KEYS", "*"))
	if err != nil {
		return err.Error()
	}
	slices.Sort(keys)
	var out strings.Builder
	if now, err := redis.Int64s(c.Do("TIME")); err == nil && len(now) == 2 {
		fmt.Fprintf(&out, "  server time %d ms\n", now[0]*1000+now[1]/1000)
	}
	for _, k := range keys {
		typ, _ := redis.String(c.Do("TYPE", k))
		ttl, _ := redis.Int64(c.Do("PTTL", k))
		var v any
		switch typ {
		case "string":
			v, _ = redis.String(c.Do("GET", k))
		case "zset":
			v, _ = redis.Strings(c.Do("ZRANGE", k, 0, -1, "WITHSCORES"))
		case "hash":
			v, _ = redis.StringMap(c.Do("HGETALL", k))
		}
		fmt.Fprintf(&out, "  %s %s PTTL %d: %v\n", k, typ, ttl, v)
	}
	return out.String()
}
