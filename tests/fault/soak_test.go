package fault

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/observe"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

var (
	soakFor  = flag.Duration("soak", time.Minute, "how long TestNemesisSoak runs")
	soakSeed = flag.Uint64("seed", 0, "the nemesis schedule of TestNemesisSoak (0: a fresh one, printed)")
)

// The nemesis soak. Client processes, in groups of one primitive each
// (mutex, fairlock, rwlock's write side; and semaphore, below), loop on a fenced
// read-modify-write of their group's register (see register): lock, read
// the register under the fencing token, write the value plus one under the
// same token, unlock. One hold in three is re-entered by its owner before
// the read and left again (one unlock) before the write, which must not
// release it. Each client reaches the lock server through a proxy
// of its own. Meanwhile a nemesis, driven by a seeded random schedule,
// partitions and slows clients, stalls, pauses and restarts the lock server
// (kill -9, with appendfsync always), kills the pub/sub connections, and
// pauses and kills clients (a killed client is replaced). Holds have a
// fixed lease, so that each hold's validity is known from its acquisition:
// from its reply until its unlock was sent, or its lease less the margin
// ran out.
//
// Checked at the end, per group: no two lease-valid holds of different
// clients overlap; the register's value equals its accepted writes (no
// fenced update lost); the history of acquisitions, re-entries, unlocks
// and expiries is linearizable for an owner-aware, reentrant mutex whose
// tokens increase (and stay the same on re-entry), and the
// history of register operations for a fenced register (porcupine).
//
// The watchdog group's clients hold a mutex with a watchdog lease (renewed)
// for up to a lease each time, and say when its Done closes; such a hold
// is valid until then, or until its unlock, its client's kill, or a lease
// after the last renewal its client sent before it was paused (SIGSTOP;
// the clients report their renewals through an observe.Observer). They
// read and write even after a loss: the register's fence must refuse them.
//
// The semaphore's clients share a capacity of 2 and have no tokens: for
// them the check is that no more than 2 lease-valid permits were held at
// once.
//
// -soak=10m runs it longer; -seed=N replays a schedule.
func TestNemesisSoak(t *testing.T) {
	seed := *soakSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("nemesis seed %d (replay with -seed=%d), %v", seed, seed, *soakFor)
	rng := rand.New(rand.NewPCG(seed, seed))

	lockSrv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	regSrv := startServer(t)
	const (
		perGroup = 3
		lease    = time.Second
	)
	groups := []string{"mutex", "fairlock", "rwlock", "watchdog", "semaphore"}
	deadline := time.Now().Add(*soakFor)

	type client struct {
		id    int
		group string
		px    *faultProxy
		c     *child
	}
	var (
		mu      sync.Mutex
		events  []soakEvent
		clients []*client
		readers sync.WaitGroup
		nextID  int
	)
	spawn := func(group string, px *faultProxy) *client {
		mu.Lock()
		id := nextID
		nextID++
		mu.Unlock()
		c := &client{id: id, group: group, px: px}
		c.c = startChild(t, "soak", px.Addr(), regSrv.Addr(), group, strconv.Itoa(id), lease.String(),
			strconv.FormatInt(deadline.UnixNano(), 10))
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
				events = append(events, e)
				mu.Unlock()
			}
		}()
		return c
	}
	for _, g := range groups {
		for range perGroup {
			clients = append(clients, spawn(g, newProxy(t, lockSrv.Addr())))
		}
	}

	// record notes, for the checker, when a client was paused or killed:
	// a watchdog hold's validity is bounded by them.
	record := func(c *client, kind string) {
		mu.Lock()
		events = append(events, soakEvent{kind: kind, group: c.group, client: c.id, call: time.Now().UnixNano()})
		mu.Unlock()
	}
	faults := map[string]int{}
	for time.Now().Add(3 * time.Second).Before(deadline) {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		d := time.Duration(300+rng.IntN(1200)) * time.Millisecond
		c := clients[rng.IntN(len(clients))]
		kind := []string{"partition", "latency", "stall", "pause-server", "restart", "kill-pubsub", "pause-client", "kill-client"}[rng.IntN(8)]
		faults[kind]++
		t.Logf("%s nemesis: %s (client %d, %v)", time.Now().Format("15:04:05.000"), kind, c.id, d)
		switch kind {
		case "partition":
			c.px.Partition(t)
			time.Sleep(d)
			c.px.Heal(t)
		case "latency":
			end := c.px.Latency(t, 100*time.Millisecond)
			time.Sleep(d)
			end()
		case "stall":
			pauseServer(t, lockSrv, "DEBUG SLEEP", d)()
		case "pause-server":
			pauseServer(t, lockSrv, "SIGSTOP", d)()
		case "restart":
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := lockSrv.Node().Restart(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		case "kill-pubsub":
			do(context.Background(), lockSrv.Addr(), "CLIENT", "KILL", "TYPE", "pubsub")
		case "pause-client":
			// Noted once stopped: every renewal the client sent before
			// the pause is then before the note.
			c.c.signal(t, syscall.SIGSTOP)
			record(c, "paused")
			time.Sleep(d)
			c.c.signal(t, syscall.SIGCONT)
		case "kill-client":
			record(c, "killed")
			c.c.kill()
			i := slices.Index(clients, c)
			clients[i] = spawn(c.group, c.px)
		}
	}
	for _, c := range clients {
		if err := c.c.wait(); err != nil {
			t.Errorf("client %d: %v", c.id, err)
		}
	}
	readers.Wait()
	t.Logf("faults injected: %v", faults)

	for _, g := range groups {
		var ge []soakEvent
		for _, e := range events {
			if e.group == g {
				ge = append(ge, e)
			}
		}
		var r soakReport
		if g == "semaphore" {
			r = checkSemaphoreGroup(ge, lease, soakCapacity)
		} else {
			reg := register{addr: regSrv.Addr(), key: "register:" + g}
			value, writes, err := reg.Totals(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			r = checkSoakGroup(g, ge, lease, value, writes)
		}
		t.Log(r)
		for _, p := range r.problems {
			t.Error(p)
		}
		if len(r.problems) > 0 {
			f, err := os.CreateTemp("", "dsync-soak-"+g+"-*.log")
			if err == nil {
				for _, e := range ge {
					fmt.Fprintln(f, time.Unix(0, e.call).Format("15:04:05.000000"), e)
				}
				f.Close()
				t.Logf("%s: the history is in %s", g, f.Name())
			}
		}
	}
}

// soakEvent is one line of a soak client's report.
type soakEvent struct {
	kind   string // acq, rel, read, write, fail; rel?, read?, write?: under way
	group  string
	client int
	token  int64
	call   int64 // ns since the epoch
	ret    int64
	ok     bool  // rel: released; read, write: accepted
	known  bool  // rel, read, write: the outcome is known
	value  int64 // read: the value read; write: the value written
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

// soakLocker is what a soak client needs of a primitive.
type soakLocker interface {
	dsync.Locker
	Token(ctx context.Context) (int64, error)
}

// soakClient is a client process of TestNemesisSoak: args lock server
// address (its proxy), register server address, group, client id, fixed
// lease, deadline (ns since the epoch). It reports each operation on
// stdout as a soakEvent.
func soakClient(args []string) error {
	lockAddr, regAddr, group := args[0], args[1], args[2]
	id, _ := strconv.Atoi(args[3])
	lease, err := time.ParseDuration(args[4])
	if err != nil {
		return err
	}
	end, _ := strconv.ParseInt(args[5], 10, 64)
	pool := &redis.Pool{MaxIdle: 8, DialContext: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, "tcp", lockAddr, redis.DialConnectTimeout(time.Second))
	}}
	b := bredigo.New(pool, bredigo.WithTimeout(2*time.Second))
	defer b.Close()
	if group == "semaphore" {
		return soakSemaphore(b, id, lease, end)
	}
	reg := register{addr: regAddr, key: "register:" + group}
	var out sync.Mutex
	say := func(e soakEvent) {
		e.group, e.client = group, id
		out.Lock()
		defer out.Unlock()
		fmt.Println(e.String())
	}
	var l soakLocker
	switch group {
	case "mutex":
		l = mutex.New(b, "soak", mutex.WithLease(lease), mutex.WithLogger(nil))
	case "fairlock":
		l = fairlock.New(b, "soak", fairlock.WithLease(lease), fairlock.WithLogger(nil))
	case "rwlock":
		l = rwlock.New(b, "soak", rwlock.WithLease(lease), rwlock.WithLogger(nil))
	case "watchdog":
		l = mutex.New(b, "soak-watchdog", mutex.WithWatchdog(lease), mutex.WithLogger(nil))
		// Each successful renewal is reported with the time it was sent,
		// from which its lease runs: the checker bounds a paused client's
		// hold by its last renewal before the pause.
		observe.Set(b, &observe.Observer{Renewed: func(r observe.Renewal) {
			if !r.Failed && r.Gone == 0 {
				say(soakEvent{kind: "renewed", call: time.Now().Add(-r.Took).UnixNano()})
			}
		}})
	default:
		return fmt.Errorf("unknown group %q", group)
	}
	now := func() int64 { return time.Now().UnixNano() }
	rng := rand.New(rand.NewPCG(uint64(id), uint64(end)))
	for now() < end {
		ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 3*time.Second)
		call := now()
		err := l.LockContext(ctx)
		if err != nil {
			say(soakEvent{kind: "fail", call: call, ret: now()})
			cancel()
			continue
		}
		token, _ := l.Token(ctx)
		say(soakEvent{kind: "acq", token: token, call: call, ret: now()})
		if m, ok := l.(*mutex.Mutex); ok && group == "watchdog" {
			// A watchdog hold is kept for up to a lease, renewed meanwhile;
			// when its Done closes (a loss, or the unlock below) the
			// client says so. It reads and writes all the same: a write
			// under a lost hold must be refused by its fence.
			done := m.Done(ctx)
			go func() {
				<-done
				say(soakEvent{kind: "lost", token: token, call: now()})
			}()
			select {
			case <-done:
				say(soakEvent{kind: "lost", token: token, call: now()})
			case <-time.After(time.Duration(rng.Int64N(int64(lease)))):
			}
		}

		// One hold in three is re-entered (a second LockContext of the
		// same owner) and left again between the read and the write: the
		// inner unlock must keep the hold, so the write stays fenced and
		// no one else acquires before the outer unlock.
		entered, inner := false, token
		if rng.IntN(3) == 0 {
			ecall := now()
			err := l.LockContext(ctx)
			var etoken int64
			if err == nil {
				entered = true
				etoken, _ = l.Token(ctx)
				if etoken != 0 {
					inner = etoken // a new hold if the first was lost meanwhile
				}
			}
			say(soakEvent{kind: "enter", token: etoken, call: ecall, ret: now(), ok: err == nil, known: true})
		}

		// Each operation is announced before it is made, so that one
		// under way when the client is killed is known to the checker.
		rcall := now()
		say(soakEvent{kind: "read?", token: token, call: rcall})
		ok, v, err := reg.Read(ctx, token)
		say(soakEvent{kind: "read", token: token, call: rcall, ret: now(), ok: ok, known: err == nil, value: v})
		if entered {
			lcall := now()
			err := l.UnlockContext(ctx)
			say(soakEvent{kind: "leave", token: inner, call: lcall, ret: now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
		}
		if ok && err == nil {
			wcall := now()
			say(soakEvent{kind: "write?", token: token, call: wcall, value: v + 1})
			ok, err := reg.Write(ctx, token, v+1)
			say(soakEvent{kind: "write", token: token, call: wcall, ret: now(), ok: ok, known: err == nil, value: v + 1})
		}
		ucall := now()
		say(soakEvent{kind: "rel?", token: token, call: ucall})
		err = l.UnlockContext(ctx)
		say(soakEvent{kind: "rel", token: token, call: ucall, ret: now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
		cancel()
	}
	return nil
}

// soakReport is what checkSoakGroup found.
type soakReport struct {
	summary  string
	overlaps int
	problems []string
}

func (r soakReport) String() string { return r.summary }

// soakCapacity is the capacity of the soak's semaphore, shared by its
// three clients.
const soakCapacity = 2

// soakSemaphore is a soak client of the semaphore group: it acquires a
// permit, holds it briefly, and releases it, until end. Semaphores have no
// fencing tokens: the checker counts the lease-valid holds at once.
func soakSemaphore(b *bredigo.Backend, id int, lease time.Duration, end int64) error {
	s := semaphore.New(b, "soak", soakCapacity, semaphore.WithLease(lease), semaphore.WithLogger(nil))
	say := func(e soakEvent) {
		e.group, e.client = "semaphore", id
		fmt.Println(e.String())
	}
	now := func() int64 { return time.Now().UnixNano() }
	for now() < end {
		ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 3*time.Second)
		call := now()
		if err := s.Acquire(ctx, 1); err != nil {
			say(soakEvent{kind: "fail", call: call, ret: now()})
			cancel()
			continue
		}
		say(soakEvent{kind: "acq", call: call, ret: now()})
		time.Sleep(time.Millisecond)
		ucall := now()
		say(soakEvent{kind: "rel?", call: ucall})
		err := s.Release(ctx, 1)
		say(soakEvent{kind: "rel", call: ucall, ret: now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
		cancel()
	}
	return nil
}

// checkSemaphoreGroup checks that no more than capacity lease-valid
// permits were held at once.
func checkSemaphoreGroup(events []soakEvent, lease time.Duration, capacity int) soakReport {
	var r soakReport
	margin := lease/100 + 2*time.Millisecond
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	open := map[int][2]int64{} // client -> {from, until}
	flush := func(c int) {
		if h, ok := open[c]; ok && h[1] > h[0] {
			edges = append(edges, edge{h[0], +1}, edge{h[1], -1})
			delete(open, c)
		}
	}
	holds, lost := 0, 0
	for _, e := range events {
		switch e.kind {
		case "acq":
			flush(e.client)
			open[e.client] = [2]int64{e.ret, e.call + int64(lease-margin)}
			holds++
		case "rel?":
			if h, ok := open[e.client]; ok {
				open[e.client] = [2]int64{h[0], min(h[1], e.call)}
			}
		case "rel":
			if !e.ok {
				lost++
			}
			flush(e.client)
		}
	}
	for c := range open {
		flush(c)
	}
	// Ends before starts at the same instant: a permit released when
	// another is acquired is not held twice.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	n, peak := 0, 0
	for _, e := range edges {
		n += e.delta
		if n > capacity {
			r.overlaps++
		}
		peak = max(peak, n)
	}
	if r.overlaps > 0 {
		r.problems = append(r.problems, fmt.Sprintf("semaphore: more than %d lease-valid permits held at once, %d times", capacity, r.overlaps))
	}
	if holds == 0 {
		r.problems = append(r.problems, "semaphore: no permit acquired")
	}
	r.summary = fmt.Sprintf("semaphore (capacity %d): %d acquisitions (%d lost); at most %d permits held at once; over capacity %d times",
		capacity, holds, lost, peak, r.overlaps)
	return r
}

// checkSoakGroup checks the events of one group of TestNemesisSoak, given
// the register's final value and accepted writes.
func checkSoakGroup(group string, events []soakEvent, lease time.Duration, value, writes int64) soakReport {
	var r soakReport
	fail := func(format string, a ...any) { r.problems = append(r.problems, fmt.Sprintf(format, a...)) }
	margin := lease/100 + 2*time.Millisecond
	type hold struct {
		client     int
		token      int64
		call, from int64 // acquisition sent, reply received
		until      int64 // validity: unlock sent, or lease less margin
		relCall    int64 // when an unlock was sent, or 0
		lost       bool  // watchdog: Done closed before the unlock
		rel        *soakEvent
		// Fixed leases: the server expires the hold a lease after the
		// script that granted it, or that re-entered it last, ran.
		expCall, expRet int64
		inner           []porcupine.Operation // re-entries and inner unlocks, in order
		depth           int                   // locks not yet unlocked, as the client counts them
		unsure          bool                  // a re-entry's token was unknown: it may have been a new hold
		id              int                   // the model's name for the hold
		optCall, optRet int64                 // unsure: when the first hold may have expired before the re-entry took a new one
	}
	var holds []*hold
	byClient := map[int]*hold{}
	var regOps []porcupine.Operation
	var acquired, failed, lost, reentered int
	var stops []*soakEvent
	renewals := map[int][]int64{} // watchdog: renewals' send times, per client
	var told int                  // watchdog: Done closed before the unlock
	watchdog := group == "watchdog"
	// An operation announced and never completed (its client was killed)
	// may have taken effect at any time after it began.
	const never = 1 << 62
	pending := map[int]*soakEvent{}
	regOp := func(e *soakEvent) porcupine.Operation {
		return porcupine.Operation{ClientId: e.client,
			Input: regInput{write: strings.HasPrefix(e.kind, "write"), token: e.token, value: e.value}, Call: e.call,
			Output: regOutput{ok: e.ok, known: e.known, value: e.value}, Return: e.ret}
	}
	for i := range events {
		e := &events[i]
		switch e.kind {
		case "read?", "write?", "rel?":
			if p := pending[e.client]; p != nil {
				p.ret = never
				if p.kind != "rel?" {
					regOps = append(regOps, regOp(p))
				}
			}
			pending[e.client] = e
			if h := byClient[e.client]; e.kind == "rel?" && h != nil && h.token == e.token {
				h.until = min(h.until, e.call)
				h.relCall = e.call
			}
			continue
		}
		switch e.kind {
		case "acq", "fail", "read", "write", "rel", "enter", "leave":
			// Only the client's own completions end its announced
			// operation: notes of a pause or a kill (the parent's), a
			// renewal or a loss (other goroutines) do not.
			delete(pending, e.client)
		}
		switch e.kind {
		case "fail":
			failed++
		case "enter":
			h := byClient[e.client]
			if !e.ok || h == nil {
				break
			}
			if e.token == 0 || e.token == h.token {
				// A re-entry (or, with its token unknown, perhaps a new
				// hold: the model allows both).
				h.depth++
				reentered++
				h.inner = append(h.inner, porcupine.Operation{ClientId: e.client, Input: lockInput{op: "enter", client: e.client, token: e.token, hold: h.id},
					Call: e.call, Output: e.token, Return: e.ret})
				// The same token: the script found the hold on the server
				// (perhaps in the expiry margin, after the client's lease
				// ran out) and extended it to a full lease from when it
				// ran; so did one that ran before the hold's earliest
				// expiry. Otherwise, with the token unknown, it may have
				// taken a new hold after the first expired.
				sure := e.token != 0 || e.ret < h.expCall
				if !sure {
					h.unsure = true
					h.optCall, h.optRet = h.expCall, h.expRet
					if watchdog {
						h.optCall, h.optRet = h.call+int64(lease), never
					}
				}
				if !watchdog {
					h.expCall, h.expRet = e.call+int64(lease), e.ret+int64(lease)
				}
				if e.token != 0 {
					// Valid a lease (less the margin) from the re-entry,
					// like a renewal: bounds below a pause or a loss too.
					renewals[e.client] = append(renewals[e.client], e.call)
					if !watchdog {
						h.until = max(h.until, e.call+int64(lease-margin))
					}
				}
				break
			}
			// The hold was lost before the re-entry, which took a new one.
			fallthrough
		case "acq":
			acquired++
			h := &hold{client: e.client, token: e.token, call: e.call, from: e.ret, id: len(holds) + 1,
				until: e.call + int64(lease-margin), expCall: e.call + int64(lease), expRet: e.ret + int64(lease), depth: 1}
			if watchdog {
				// Renewed: valid until its holder is told (lost), unlocks,
				// is killed, or is paused past its lease (below).
				h.until = never
			}
			holds = append(holds, h)
			byClient[e.client] = h
		case "rel":
			if h := byClient[e.client]; h != nil && h.token == e.token {
				h.rel = e
				h.until = min(h.until, e.call)
				if !e.ok {
					lost++
				}
			}
		case "leave":
			// An inner unlock: the hold stays until the outer one.
			if h := byClient[e.client]; h != nil && h.token == e.token && e.known && !e.ok {
				// The hold was lost (ErrNotHeld). The client watches only
				// the first hold's Done: this may be the only word of the
				// loss of a hold the re-entry took.
				h.until = min(h.until, e.call)
				h.lost = true
			} else if h != nil && h.token == e.token {
				if h.depth--; h.depth <= 0 || h.unsure {
					// It may have released the hold (a re-entry that
					// was a new hold).
					h.until = min(h.until, e.call)
				}
				op := "rel"
				if !e.known {
					op = "rel?"
				}
				h.inner = append(h.inner, porcupine.Operation{ClientId: e.client, Input: lockInput{op: op, client: e.client, token: e.token, hold: h.id},
					Call: e.call, Output: int64(0), Return: e.ret})
			}
		case "read", "write":
			regOps = append(regOps, regOp(e))
		case "lost":
			if h := byClient[e.client]; h != nil && h.token == e.token {
				if h.relCall == 0 || e.call < h.relCall {
					told++ // Done closed before any unlock: a loss
					h.lost = true
				}
				h.until = min(h.until, e.call)
			}
		case "paused", "killed":
			stops = append(stops, e)
		case "renewed":
			renewals[e.client] = append(renewals[e.client], e.call)
		}
	}
	// A hold whose client was killed ends then (or, acquired between the
	// note and the signal, at its acquisition's reply at the latest); one
	// whose client was paused is valid at most a lease (less the margin)
	// after the last renewal sent before the pause (or the acquisition).
	for _, e := range stops {
		for _, h := range holds {
			if h.client != e.client || h.until <= e.call {
				continue
			}
			if e.kind == "killed" {
				h.until = min(h.until, max(e.call, h.from))
				continue
			}
			if h.call > e.call {
				continue
			}
			last := h.call
			for _, r := range renewals[e.client] {
				if r >= h.call && r <= e.call {
					last = max(last, r)
				}
			}
			h.until = min(h.until, last+int64(lease-margin))
		}
	}
	// A lost hold (Done closed, or the unlock did not release it) was valid
	// at most a lease (less the margin) after the last renewal of its
	// chain: its client's "lost" line comes later, by its goroutine's
	// wake-up, perhaps after the unlock was sent.
	for c := range renewals {
		slices.Sort(renewals[c])
	}
	for _, h := range holds {
		if !h.lost && (h.rel == nil || h.rel.ok) {
			continue // not lost, or released: its chain held
		}
		last := h.call
		for _, r := range renewals[h.client] {
			if r < h.call {
				continue
			}
			if r > last+int64(lease-margin) {
				break
			}
			last = r
		}
		h.until = min(h.until, last+int64(lease-margin))
	}
	for _, p := range pending {
		if p.kind != "rel?" {
			p.ret = never
			regOps = append(regOps, regOp(p))
		}
	}

	// Lease-valid holds never overlap.
	slices.SortFunc(holds, func(a, b *hold) int { return int(a.from - b.from) })
	for i := 1; i < len(holds); i++ {
		for j := i - 1; j >= 0 && j >= i-8; j-- {
			if holds[j].client != holds[i].client && holds[j].until > holds[i].from {
				r.overlaps++
				fail("%s: client %d's hold (token %d) valid until %s, client %d acquired (token %d) %v before",
					group, holds[j].client, holds[j].token, time.Unix(0, holds[j].until).Format("15:04:05.000"),
					holds[i].client, holds[i].token, time.Duration(holds[j].until-holds[i].from))
			}
		}
	}
	// No fenced update lost: each accepted write added one to the value.
	if value != writes {
		fail("%s: register value %d after %d accepted writes: %d fenced updates lost", group, value, writes, writes-value)
	}

	// The lock history is linearizable for an owner-aware, reentrant,
	// fenced mutex.
	var lockOps []porcupine.Operation
	for _, h := range holds {
		lockOps = append(lockOps, porcupine.Operation{ClientId: h.client, Input: lockInput{op: "acq", client: h.client, token: h.token, hold: h.id},
			Call: h.call, Output: h.token, Return: h.from})
		lockOps = append(lockOps, h.inner...)
		if h.rel != nil && h.rel.known && h.rel.ok {
			lockOps = append(lockOps, porcupine.Operation{ClientId: h.client, Input: lockInput{op: "rel", client: h.client, token: h.token, hold: h.id},
				Call: h.rel.call, Output: int64(0), Return: h.rel.ret})
		} else if h.rel != nil && !h.rel.known {
			lockOps = append(lockOps, porcupine.Operation{ClientId: h.client, Input: lockInput{op: "rel?", client: h.client, token: h.token, hold: h.id},
				Call: h.rel.call, Output: int64(0), Return: h.rel.ret})
		} else if h.rel == nil && h.relCall != 0 {
			// Killed while unlocking.
			lockOps = append(lockOps, porcupine.Operation{ClientId: h.client, Input: lockInput{op: "rel?", client: h.client, token: h.token, hold: h.id},
				Call: h.relCall, Output: int64(0), Return: never})
		}
		// Every hold expires in the end, if its unlocks did not release
		// it (for one already released, the model's expiry is a no-op).
		if watchdog && h.until < never {
			// A renewed hold expired on the server at some time after
			// its holder stopped believing in it.
			lockOps = append(lockOps, porcupine.Operation{ClientId: h.client, Input: lockInput{op: "exp", client: h.client, token: h.token, hold: h.id},
				Call: h.until, Output: int64(0), Return: never})
		} else if !watchdog {
			// The server expired the hold a lease after it ran the
			// acquisition (or last re-entry), between call and reply.
			lockOps = append(lockOps, porcupine.Operation{ClientId: h.client, Input: lockInput{op: "exp", client: h.client, token: h.token, hold: h.id},
				Call: h.expCall, Output: int64(0), Return: h.expRet})
		}
		if h.unsure {
			// The first hold may have expired before the re-entry took
			// a new one, whose expiry is the one above.
			lockOps = append(lockOps, porcupine.Operation{ClientId: h.client, Input: lockInput{op: "exp?", client: h.client, token: h.token, hold: h.id},
				Call: h.optCall, Output: int64(0), Return: h.optRet})
		}
	}
	lockResult := porcupine.CheckOperationsTimeout(mutexModel.ToModel(), lockOps, 30*time.Second)
	regResult := porcupine.CheckOperationsTimeout(registerModel.ToModel(), regOps, 30*time.Second)
	r.summary = fmt.Sprintf("%s: %d holds (%d re-entered, %d lost, %d acquisitions failed), %d fenced writes accepted, value %d; overlaps %d, lost updates %d; porcupine: mutex %s, register %s",
		group, acquired, reentered, lost, failed, writes, value, r.overlaps, writes-value, lockResult, regResult)
	if watchdog {
		r.summary += fmt.Sprintf("; Done closed before the unlock %d times", told)
	}
	if acquired == 0 {
		fail("%s: no hold acquired", group)
	}
	if lockResult != porcupine.Ok {
		fail("%s: the lock history is not linearizable for a fenced mutex (%s)", group, lockResult)
	}
	if regResult != porcupine.Ok {
		fail("%s: the register history is not linearizable for a fenced register (%s)", group, regResult)
	}
	return r
}

// The soak's checker catches what it looks for: two clients holding at
// once, an update lost, a token that goes back.
func TestSoakCheckerCatches(t *testing.T) {
	const lease = time.Second
	ms := int64(time.Millisecond)
	// Client 0 holds [0, 100ms], client 1 [200, 300ms]: fine.
	good := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * ms},
		{kind: "read", client: 0, token: 10, call: 2 * ms, ret: 3 * ms, ok: true, known: true, value: 0},
		{kind: "write", client: 0, token: 10, call: 4 * ms, ret: 5 * ms, ok: true, known: true, value: 1},
		{kind: "rel", client: 0, token: 10, call: 100 * ms, ret: 101 * ms, ok: true, known: true},
		{kind: "acq", client: 1, token: 11, call: 50 * ms, ret: 200 * ms},
		{kind: "read", client: 1, token: 11, call: 202 * ms, ret: 203 * ms, ok: true, known: true, value: 1},
		{kind: "write", client: 1, token: 11, call: 204 * ms, ret: 205 * ms, ok: true, known: true, value: 2},
		{kind: "rel", client: 1, token: 11, call: 300 * ms, ret: 301 * ms, ok: true, known: true},
	}
	if r := checkSoakGroup("good", good, lease, 2, 2); len(r.problems) > 0 {
		t.Fatalf("a correct history: %v", r.problems)
	}
	overlap := slices.Clone(good)
	overlap[4].ret = 90 * ms // client 1 acquired while client 0 held
	if r := checkSoakGroup("overlap", overlap, lease, 2, 2); r.overlaps == 0 || len(r.problems) < 2 {
		t.Errorf("two holders at once not caught: %v", r)
	}
	lostUpdate := slices.Clone(good)
	lostUpdate[5].value, lostUpdate[6].value = 0, 1 // client 1 read a stale value
	if r := checkSoakGroup("lost", lostUpdate, lease, 1, 2); len(r.problems) < 2 {
		t.Errorf("a lost update not caught: %v", r)
	}
	backwards := slices.Clone(good)
	backwards[4].token = 9
	for i := 5; i < 8; i++ {
		backwards[i].token = 9
	}
	if r := checkSoakGroup("backwards", backwards, lease, 2, 2); len(r.problems) == 0 {
		t.Errorf("a token going back not caught: %v", r)
	}

	// A write under way when its client is killed (the parent notes the
	// kill before the write's reply, which never comes) may have been
	// applied: the next holder reading its value is no violation.
	killedWriting := []soakEvent{
		{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * ms},
		{kind: "read?", client: 0, token: 10, call: 2 * ms},
		{kind: "read", client: 0, token: 10, call: 2 * ms, ret: 3 * ms, ok: true, known: true, value: 0},
		{kind: "write?", client: 0, token: 10, call: 4 * ms, value: 1},
		{kind: "killed", client: 0, call: 5 * ms},
		{kind: "acq", client: 1, token: 11, call: 50 * ms, ret: 1200 * ms},
		{kind: "read", client: 1, token: 11, call: 1202 * ms, ret: 1203 * ms, ok: true, known: true, value: 1},
		{kind: "write", client: 1, token: 11, call: 1204 * ms, ret: 1205 * ms, ok: true, known: true, value: 2},
		{kind: "rel", client: 1, token: 11, call: 1300 * ms, ret: 1301 * ms, ok: true, known: true},
	}
	if r := checkSoakGroup("killed-writing", killedWriting, lease, 2, 2); len(r.problems) > 0 {
		t.Errorf("a write applied by a client killed before its reply: %v", r.problems)
	}
	paused := slices.Insert(slices.Clone(good), 2, soakEvent{kind: "paused", client: 0, call: 3 * ms})
	paused = slices.Insert(paused, 2, soakEvent{kind: "read?", client: 0, token: 10, call: 2 * ms})
	if r := checkSoakGroup("paused-reading", paused, lease, 2, 2); len(r.problems) > 0 {
		t.Errorf("a read under way when its client was paused: %v", r.problems)
	}

	// Watchdog holds: valid until Done closes (lost), the client is
	// killed, or a lease after it is paused. Client 0 holds from 1ms and
	// never unlocks; client 1 acquires at 2s.
	wd := func(extra ...soakEvent) []soakEvent {
		es := append([]soakEvent{{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * ms}}, extra...)
		return append(es, []soakEvent{
			{kind: "acq", client: 1, token: 11, call: 1500 * ms, ret: 2000 * ms},
			{kind: "rel?", client: 1, token: 11, call: 2100 * ms},
			{kind: "rel", client: 1, token: 11, call: 2100 * ms, ret: 2101 * ms, ok: true, known: true},
		}...)
	}
	if r := checkSoakGroup("watchdog", wd(), lease, 0, 0); r.overlaps == 0 {
		t.Errorf("a renewed hold never lost, never released, overlapping another not caught: %v", r)
	}
	for _, stop := range []soakEvent{
		{kind: "lost", client: 0, token: 10, call: 1900 * ms},
		{kind: "killed", client: 0, call: 1000 * ms},
		{kind: "paused", client: 0, call: 500 * ms},
	} {
		if r := checkSoakGroup("watchdog", wd(stop), lease, 0, 0); r.overlaps != 0 || slices.ContainsFunc(r.problems, func(p string) bool { return strings.Contains(p, "linearizable") }) {
			t.Errorf("watchdog hold ended by %q: %v", stop.kind, r.problems)
		}
	}
	renewedPaused := wd(soakEvent{kind: "renewed", client: 0, call: 1400 * ms}, soakEvent{kind: "paused", client: 0, call: 1500 * ms})
	if r := checkSoakGroup("watchdog", renewedPaused, lease, 0, 0); r.overlaps == 0 {
		t.Errorf("a client renewed at 1.4s and paused at 1.5s, another acquiring at 2s, not caught: %v", r)
	}
	notRenewed := wd(soakEvent{kind: "renewed", client: 0, call: 900 * ms}, soakEvent{kind: "paused", client: 0, call: 1500 * ms})
	if r := checkSoakGroup("watchdog", notRenewed, lease, 0, 0); r.overlaps != 0 {
		t.Errorf("a client last renewed at 0.9s, paused at 1.5s, another acquiring at 2s: %v", r.problems)
	}

	// Semaphore of capacity 2: three clients holding at once is caught,
	// two is not, nor a release and an acquisition at the same instant.
	sem := func(holds ...[2]int64) []soakEvent {
		var es []soakEvent
		for c, h := range holds {
			es = append(es, soakEvent{kind: "acq", client: c, call: h[0], ret: h[0]},
				soakEvent{kind: "rel?", client: c, call: h[1]},
				soakEvent{kind: "rel", client: c, call: h[1], ret: h[1] + 1, ok: true, known: true})
		}
		return es
	}
	if r := checkSemaphoreGroup(sem([2]int64{0, 100 * ms}, [2]int64{10 * ms, 50 * ms}, [2]int64{50 * ms, 90 * ms}), lease, 2); r.overlaps != 0 {
		t.Errorf("two permits at once reported over capacity: %v", r)
	}
	if r := checkSemaphoreGroup(sem([2]int64{0, 100 * ms}, [2]int64{10 * ms, 50 * ms}, [2]int64{40 * ms, 90 * ms}), lease, 2); r.overlaps == 0 {
		t.Errorf("three permits at once not caught: %v", r)
	}
}

type lockInput struct {
	op     string // acq, enter (re-entry), rel (one unlock), rel? (outcome unknown), exp, exp? (perhaps)
	client int
	token  int64 // of the hold; 0: unknown (Token failed)
	hold   int   // the checker's hold the operation belongs to
}

type mutexState struct {
	holder int // -1: free
	count  int // the holder's locks not yet unlocked
	token  int64
	hold   int // the checker's hold held
}

// mutexModel: an owner-aware, reentrant mutex whose acquisitions hand out
// increasing tokens. A re-entry keeps the hold and its token, and the hold
// is released by as many unlocks as it was locked; an expiry releases it
// whatever the count. A release or expiry of a hold the owner no longer
// has is a no-op (it was released or expired already).
var mutexModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{mutexState{holder: -1}} },
	Step: func(state, input, output any) []any {
		s, in := state.(mutexState), input.(lockInput)
		// An operation is matched to its hold, not just its client, nor
		// a token that may be unknown.
		mine := s.holder == in.client && s.hold == in.hold
		free := mutexState{holder: -1, token: s.token}
		unlocked := free // one unlock of the holder's
		if s.count > 1 {
			unlocked = mutexState{holder: s.holder, count: s.count - 1, token: s.token, hold: s.hold}
		}
		switch in.op {
		case "acq":
			token := output.(int64)
			if token == 0 {
				// Token() failed: the hold's token is unknown.
				if s.holder != -1 {
					return nil
				}
				return []any{mutexState{holder: in.client, count: 1, token: s.token, hold: in.hold}}
			}
			if s.holder != -1 || token <= s.token {
				return nil
			}
			return []any{mutexState{holder: in.client, count: 1, token: token, hold: in.hold}}
		case "enter":
			// A re-entry keeps the hold and its token. With the token
			// unknown (Token failed) it may also have been a new hold.
			var next []any
			if mine && (in.token == 0 || in.token == s.token) {
				next = append(next, mutexState{holder: s.holder, count: s.count + 1, token: s.token, hold: s.hold})
			}
			if in.token == 0 && s.holder == -1 {
				next = append(next, mutexState{holder: in.client, count: 1, token: s.token, hold: in.hold})
			}
			return next
		case "rel":
			if !mine {
				return nil
			}
			return []any{unlocked}
		case "rel?":
			if !mine {
				return []any{s}
			}
			return []any{s, unlocked}
		case "exp":
			if !mine {
				return []any{s}
			}
			return []any{free}
		case "exp?":
			if !mine {
				return []any{s}
			}
			return []any{s, free}
		}
		return nil
	},
}

type regInput struct {
	write bool
	token int64
	value int64 // write: the value written
}

type regOutput struct {
	ok, known bool
	value     int64 // read: the value read
}

type regState struct{ value, fence int64 }

// registerModel: the fenced register (see register): an operation with a
// token below the highest seen is refused; an accepted one raises the
// fence to its token. An operation whose outcome is unknown may have been
// applied or not.
var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		if in.token < s.fence {
			if out.known && out.ok {
				return nil
			}
			return []any{s}
		}
		next := regState{value: s.value, fence: in.token}
		if in.write {
			next.value = in.value
		} else if out.known && out.value != s.value {
			return nil
		}
		if !out.known {
			return []any{s, next}
		}
		if !out.ok {
			return nil
		}
		return []any{next}
	},
}
