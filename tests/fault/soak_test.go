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
	"sync"
	"syscall"
	"testing"
	"time"

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
// The semaphore's clients share a capacity of 3, a permit each time, and
// have no tokens: for them the check is that no more than 3 lease-valid
// permits were held at once, and that the history is linearizable for a
// semaphore of acquired permits.
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
		say(soakEvent{kind: "acq", call: call, ret: now(), value: 1})
		time.Sleep(time.Millisecond)
		ucall := now()
		say(soakEvent{kind: "rel?", call: ucall, value: 1})
		err := s.Release(ctx, 1)
		say(soakEvent{kind: "rel", call: ucall, ret: now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld), value: 1})
		cancel()
	}
	return nil
}
