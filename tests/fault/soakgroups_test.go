package fault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/observe"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// soakGroup is one primitive under the nemesis soak: its clients, each a
// process of its own that loops on the primitive and reports what it did
// as soakEvents, and the checker of their events.
//
// Adding a primitive is a few lines: a run function (most are an adapter
// to soakLocker and the exclusive loop, or a loop of their own that says
// events of the kinds buildHolds reads), a check function (checkExclusive
// for anything exclusive with fencing tokens), and an entry in soakGroups.
// The election's, for one (soakelection_test.go): a term is an exclusive
// hold whose token is the term's, renewed while it leads, so it is
// checked as the watchdog group is (a term is valid until its Done closes,
// it is resigned, or its client is killed or paused past its lease), and
// its tokens must increase across terms:
//
//	{name: "election", clients: 3, register: true,
//		carries: []string{"dsync:election:{soak}"}, // the key that carries a term
//		check:   checkElection("election"),
//		run:     func(c *soakEnv) error { return soakElection(c, "soak") },
//		free:    freeElection("soak"), // a fresh candidate wins, and resigns
//	},
//
// The harness does the rest: it starts the clients behind proxies of their
// own, puts them under the nemesis with every other group, notes pauses,
// kills and evictions of the group's keys in its history, checks that a
// fresh owner takes all of the primitive at the end (free), and prints the
// group's counts.
type soakGroup struct {
	name    string // of the group, in events and on the command line
	clients int    // processes
	servers int    // lock servers its clients use: 1, or 2 (c.b[1] is the second)
	// register: its clients do fenced read-modify-writes of the register
	// named after the group, whose totals the checker gets.
	register bool
	// broken: a deliberately broken client, for the test that the soak
	// catches it; never part of TestNemesisSoak.
	broken bool
	// run is a client's loop, in its process, until c.end.
	run func(c *soakEnv) error
	// carries are the keys, on any of its servers, that carry the group's
	// holds (or their prefixes, ending in "*"): an eviction of one may end
	// a hold (see buildHolds).
	carries []string
	// check checks the group's events (its clients' and the parent's
	// notes), given its register's totals.
	check func(events []soakEvent, lease time.Duration, value, writes int64) soakReport
	// free takes all of the primitive for a fresh owner, through
	// backends on its servers (not through the proxies), waiting until ctx
	// ends, and gives it back: nothing is lost for good.
	free func(ctx context.Context, b []backend.Backend) error
}

// soakGroups are the groups of the soak, the broken ones included.
func soakGroups() []soakGroup {
	exclusive := func(l func(b []backend.Backend) soakLocker) func(context.Context, []backend.Backend) error {
		return func(ctx context.Context, b []backend.Backend) error {
			m := l(b)
			ctx = dsync.WithOwner(ctx)
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			return m.UnlockContext(ctx)
		}
	}
	mutexOf := func(name string) func(b []backend.Backend) soakLocker {
		return func(b []backend.Backend) soakLocker { return mutex.New(b[0], name, mutex.WithLogger(nil)) }
	}
	return []soakGroup{
		{name: "mutex", clients: 3, register: true, carries: []string{"dsync:mutex:{soak}"}, check: checkExclusive("mutex", holdOpts{}),
			run: func(c *soakEnv) error {
				return c.exclusiveLoop(mutex.New(c.b[0], "soak", mutex.WithLease(c.lease), mutex.WithLogger(nil)))
			},
			free: exclusive(mutexOf("soak")),
		},
		{name: "fairlock", clients: 3, register: true, carries: []string{"dsync:fairlock:{soak}"}, check: checkExclusive("fairlock", holdOpts{}),
			run: func(c *soakEnv) error {
				return c.exclusiveLoop(fairlock.New(c.b[0], "soak", fairlock.WithLease(c.lease), fairlock.WithLogger(nil)))
			},
			free: exclusive(func(b []backend.Backend) soakLocker { return fairlock.New(b[0], "soak", fairlock.WithLogger(nil)) }),
		},
		{name: "rwlock", clients: 4, register: true, carries: []string{"dsync:rwlock:{soak}", "dsync:rwlock:{soak}:readers", "dsync:rwlock:{soak}:rexpiry"},
			check: checkRWGroup, run: soakRWLock,
			free: exclusive(func(b []backend.Backend) soakLocker { return rwlock.New(b[0], "soak", rwlock.WithLogger(nil)) }),
		},
		{name: "watchdog", clients: 3, register: true, carries: []string{"dsync:mutex:{soak-watchdog}"}, check: checkExclusive("watchdog", holdOpts{watchdog: true}),
			run: soakWatchdog, free: exclusive(mutexOf("soak-watchdog")),
		},
		{name: "semaphore", clients: 4, carries: []string{"dsync:semaphore:{soak}", "dsync:semaphore:{soak}:holders"},
			check: checkSemaphore, run: func(c *soakEnv) error { return soakSemaphore(c, false) }, free: freeSemaphore,
		},
		{name: "election", clients: 3, register: true, carries: []string{"dsync:election:{soak}"}, check: checkElection("election"),
			run: func(c *soakEnv) error { return soakElection(c, "soak") }, free: freeElection("soak"),
		},
		{name: "multilock", clients: 3, servers: 2, register: true,
			carries: []string{"dsync:mutex:{soak-ml}", "dsync:fairlock:{soak-ml}", "dsync:rwlock:{soak-ml}"},
			check:   checkExclusive("multilock", holdOpts{partial: true}), run: soakMultilock,
			free: exclusive(func(b []backend.Backend) soakLocker {
				return soakAll(b, nil)
			}),
		},

		// Portable permits and the wait group (issue 36): soakpermits_test.go,
		// soakwaitgroup_test.go.
		permitsSoakGroup(),
		waitGroupSoakGroup(),

		// Broken builds, which the soak must catch (TestSoakCatchesBrokenBuilds):
		// a semaphore that lets more than its capacity in, and portable
		// permits that do; a mutex that excludes nobody; an election that
		// lets several lead; read holds that do not keep writers out.
		{name: "semaphore-nocap", clients: 4, broken: true, check: checkSemaphore, free: freeSemaphore,
			carries: []string{"dsync:semaphore:{soak}", "dsync:semaphore:{soak}:holders"},
			run:     func(c *soakEnv) error { return soakSemaphore(c, true) },
		},
		permitsGroup("permits-nocap", true),
		{name: "mutex-nolock", clients: 3, register: true, broken: true, check: checkExclusive("mutex-nolock", holdOpts{}),
			carries: []string{"dsync:mutex:{soak-nolock-*"},
			run: func(c *soakEnv) error {
				// Each client its own lock: nothing excludes the others.
				return c.exclusiveLoop(mutex.New(c.b[0], "soak-nolock-"+strconv.Itoa(c.id), mutex.WithLease(c.lease), mutex.WithLogger(nil)))
			},
			free: exclusive(mutexOf("soak-nolock")),
		},
		{name: "election-split", clients: 3, register: true, broken: true, check: checkElection("election-split"),
			carries: []string{"dsync:election:{soak-split-*"},
			run: func(c *soakEnv) error {
				// Each client campaigns in an election of its own: every
				// one leads at once.
				return soakElection(c, "soak-split-"+strconv.Itoa(c.id))
			},
			free: freeElection("soak-split"),
		},
		{name: "rwlock-readers-elsewhere", clients: 4, register: true, broken: true, check: checkRWGroup,
			carries: []string{"dsync:rwlock:{soak-w}", "dsync:rwlock:{soak-r}:readers", "dsync:rwlock:{soak-r}:rexpiry"},
			run: func(c *soakEnv) error {
				// Readers lock another name than writers.
				return c.rwLoop(rwlock.New(c.b[0], "soak-w", rwlock.WithLease(c.lease), rwlock.WithLogger(nil)),
					rwlock.New(c.b[0], "soak-r", rwlock.WithLease(c.lease), rwlock.WithLogger(nil)))
			},
			free: exclusive(func(b []backend.Backend) soakLocker { return rwlock.New(b[0], "soak-w", rwlock.WithLogger(nil)) }),
		},
	}
}

// soakGroupNamed returns the group called name.
func soakGroupNamed(name string) (soakGroup, bool) {
	for _, g := range soakGroups() {
		if g.name == name {
			return g, true
		}
	}
	return soakGroup{}, false
}

// carried reports whether an eviction of key may have ended a hold of g.
func (g soakGroup) carried(key string) bool {
	return slices.ContainsFunc(g.carries, func(c string) bool {
		if p, ok := strings.CutSuffix(c, "*"); ok {
			return strings.HasPrefix(key, p)
		}
		return key == c
	})
}

// checkExclusive checks an exclusive lock's group, whose holds are as o
// says (see checkSoakGroup).
func checkExclusive(group string, o holdOpts) func([]soakEvent, time.Duration, int64, int64) soakReport {
	return func(events []soakEvent, lease time.Duration, value, writes int64) soakReport {
		return checkExclusiveGroup(group, o, events, lease, value, writes)
	}
}

func checkSemaphore(events []soakEvent, lease time.Duration, _, _ int64) soakReport {
	return checkSemaphoreGroup(events, lease, soakCapacity)
}

// freeSemaphore takes every permit of the soak's semaphore for a fresh
// owner and gives them back.
func freeSemaphore(ctx context.Context, b []backend.Backend) error {
	s := semaphore.New(b[0], "soak", soakCapacity, semaphore.WithLogger(nil))
	ctx = dsync.WithOwner(ctx)
	if err := s.Acquire(ctx, soakCapacity); err != nil {
		return err
	}
	return s.Release(ctx, soakCapacity)
}

// soakEnv is a soak client's side: its group, its backends (one per lock
// server, each through the client's proxy), its register, its random
// source, and where it says what it did.
type soakEnv struct {
	group string
	id    int
	lease time.Duration
	end   int64 // ns since the epoch
	b     []backend.Backend
	reg   register
	rng   *rand.Rand
	out   sync.Mutex
}

// say reports e on stdout, one line.
func (c *soakEnv) say(e soakEvent) {
	e.group, e.client = c.group, c.id
	c.out.Lock()
	defer c.out.Unlock()
	fmt.Println(e.String())
}

func (c *soakEnv) now() int64 { return time.Now().UnixNano() }

// soakClient is a client process of the soak: args group, client id,
// fixed lease, deadline (ns since the epoch), register server address,
// and the address of each lock server (its proxy). It reports each
// operation on stdout as a soakEvent.
func soakClient(args []string) error {
	if len(args) < 6 {
		return fmt.Errorf("soak client: args %q", args)
	}
	g, ok := soakGroupNamed(args[0])
	if !ok {
		return fmt.Errorf("unknown group %q", args[0])
	}
	c := &soakEnv{group: g.name}
	c.id, _ = strconv.Atoi(args[1])
	lease, err := time.ParseDuration(args[2])
	if err != nil {
		return err
	}
	c.lease = lease
	c.end, _ = strconv.ParseInt(args[3], 10, 64)
	c.reg = register{addr: args[4], key: "register:" + g.name}
	c.rng = rand.New(rand.NewPCG(uint64(c.id), uint64(c.end)))
	for _, addr := range args[5:] {
		pool := &redis.Pool{MaxIdle: 8, DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr, redis.DialConnectTimeout(time.Second))
		}}
		b := bredigo.New(pool, bredigo.WithTimeout(2*time.Second))
		defer b.Close()
		c.b = append(c.b, b)
	}
	return g.run(c)
}

// soakLocker is what the exclusive loop needs of a lock.
type soakLocker interface {
	dsync.Locker
	Token(ctx context.Context) (int64, error)
}

// exclusiveLoop runs c.exclusiveOnce until c.end.
func (c *soakEnv) exclusiveLoop(l soakLocker) error {
	for c.now() < c.end {
		c.exclusiveOnce(l, nil)
	}
	return nil
}

// exclusiveOnce takes l for a fresh owner, does a fenced read-modify-write
// of the register under its token, and unlocks. One hold in three is
// re-entered (a second LockContext of the same owner) and left again
// between the read and the write: the inner unlock must keep the hold, so
// the write stays fenced and no one else acquires before the outer
// unlock; unless l has a noReentry method. With done (a watchdog lock's lost signal), the hold is kept for
// up to a lease first, renewed meanwhile; when done closes (a loss, or the
// unlock) the client says so. It reads and writes all the same: a write
// under a lost hold must be refused by its fence.
func (c *soakEnv) exclusiveOnce(l soakLocker, done func(context.Context) <-chan struct{}) {
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 3*time.Second)
	defer cancel()
	call := c.now()
	err := l.LockContext(ctx)
	if err != nil {
		c.say(soakEvent{kind: "fail", call: call, ret: c.now()})
		return
	}
	token, _ := l.Token(ctx)
	c.say(soakEvent{kind: "acq", token: token, call: call, ret: c.now()})
	if done != nil {
		d := done(ctx)
		go func() {
			<-d
			c.say(soakEvent{kind: "lost", token: token, call: c.now()})
		}()
		select {
		case <-d:
			c.say(soakEvent{kind: "lost", token: token, call: c.now()})
		case <-time.After(time.Duration(c.rng.Int64N(int64(c.lease)))):
		}
	}

	entered, inner := false, token
	if _, no := l.(interface{ noReentry() }); c.rng.IntN(3) == 0 && !no {
		ecall := c.now()
		err := l.LockContext(ctx)
		var etoken int64
		if err == nil {
			entered = true
			etoken, _ = l.Token(ctx)
			if etoken != 0 {
				inner = etoken // a new hold if the first was lost meanwhile
			}
		}
		c.say(soakEvent{kind: "enter", token: etoken, call: ecall, ret: c.now(), ok: err == nil, known: true})
	}

	// Each operation is announced before it is made, so that one under
	// way when the client is killed is known to the checker.
	rcall := c.now()
	c.say(soakEvent{kind: "read?", token: token, call: rcall})
	ok, v, err := c.reg.Read(ctx, token)
	c.say(soakEvent{kind: "read", token: token, call: rcall, ret: c.now(), ok: ok, known: err == nil, value: v})
	if entered {
		lcall := c.now()
		err := l.UnlockContext(ctx)
		c.say(soakEvent{kind: "leave", token: inner, call: lcall, ret: c.now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
	}
	if ok && err == nil {
		wcall := c.now()
		c.say(soakEvent{kind: "write?", token: token, call: wcall, value: v + 1})
		ok, err := c.reg.Write(ctx, token, v+1)
		c.say(soakEvent{kind: "write", token: token, call: wcall, ret: c.now(), ok: ok, known: err == nil, value: v + 1})
	}
	ucall := c.now()
	c.say(soakEvent{kind: "rel?", token: token, call: ucall})
	err = l.UnlockContext(ctx)
	c.say(soakEvent{kind: "rel", token: token, call: ucall, ret: c.now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
}

// soakWatchdog is a client of the watchdog group: a mutex with a watchdog
// lease (renewed), held for up to a lease each time. Each successful
// renewal is reported with the time it was sent, from which its lease
// runs: the checker bounds a paused client's hold by its last renewal
// before the pause.
func soakWatchdog(c *soakEnv) error {
	m := mutex.New(c.b[0], "soak-watchdog", mutex.WithWatchdog(c.lease), mutex.WithLogger(nil))
	c.reportRenewals()
	for c.now() < c.end {
		c.exclusiveOnce(m, m.Done)
	}
	return nil
}

// reportRenewals has the client say when each successful renewal of its
// first backend's leases was sent, from which its lease runs (the checker
// bounds a paused client's renewed holds by the last one before the
// pause).
func (c *soakEnv) reportRenewals() {
	observe.Set(c.b[0], &observe.Observer{Renewed: func(r observe.Renewal) {
		if !r.Failed && r.Gone == 0 {
			c.say(soakEvent{kind: "renewed", call: time.Now().Add(-r.Took).UnixNano()})
		}
	}})
}

// soakRWLock is a client of the rwlock group: a write hold one time in
// three (the exclusive loop's fenced read-modify-write), a read hold
// otherwise.
func soakRWLock(c *soakEnv) error {
	m := rwlock.New(c.b[0], "soak", rwlock.WithLease(c.lease), rwlock.WithLogger(nil))
	return c.rwLoop(m, m)
}

// rwLoop runs the rwlock group's client on w's write side and r's read
// side (the same lock, but for a broken build).
func (c *soakEnv) rwLoop(w, r *rwlock.RWMutex) error {
	for c.now() < c.end {
		if c.rng.IntN(3) == 0 {
			c.exclusiveOnce(w, nil)
		} else {
			c.readOnce(r)
		}
	}
	return nil
}

// readOnce takes a read hold for a fresh owner, re-enters it one time in
// three, keeps it a few milliseconds (so that readers overlap), and
// leaves it. Read holds have no token: their events say 0.
func (c *soakEnv) readOnce(m *rwlock.RWMutex) {
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 3*time.Second)
	defer cancel()
	call := c.now()
	if err := m.RLockContext(ctx); err != nil {
		c.say(soakEvent{kind: "rfail", call: call, ret: c.now()})
		return
	}
	c.say(soakEvent{kind: "racq", call: call, ret: c.now()})
	entered := false
	if c.rng.IntN(3) == 0 {
		ecall := c.now()
		err := m.RLockContext(ctx)
		entered = err == nil
		c.say(soakEvent{kind: "renter", call: ecall, ret: c.now(), ok: err == nil, known: true})
	}
	time.Sleep(time.Duration(c.rng.IntN(5000)) * time.Microsecond)
	if entered {
		lcall := c.now()
		err := m.RUnlockContext(ctx)
		c.say(soakEvent{kind: "rleave", call: lcall, ret: c.now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
	}
	ucall := c.now()
	c.say(soakEvent{kind: "rrel?", call: ucall})
	err := m.RUnlockContext(ctx)
	c.say(soakEvent{kind: "rrel", call: ucall, ret: c.now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
}

// soakSemaphore is a client of the semaphore group: it acquires n permits
// (1 to the capacity) for a fresh owner; one time in three, with room
// left, the owner asks for m more, waiting at most 100ms (an owner's
// further acquisition queues like any other, and may wait behind a waiter
// that waits for the owner's own permits); it holds them a few
// milliseconds, gives the m back, then the n. Events carry the permits in their value. With
// broken, the semaphore's capacity is raised on the server (SetCapacity)
// to three times what the checker is told: a build that skips its
// capacity check.
func soakSemaphore(c *soakEnv, broken bool) error {
	s := semaphore.New(c.b[0], "soak", soakCapacity, semaphore.WithLease(c.lease), semaphore.WithLogger(nil))
	if broken {
		c.raiseCapacity(s)
	}
	for c.now() < c.end {
		c.permitsOnce(s)
	}
	return nil
}

// raiseCapacity sets s's capacity on the server to three times
// soakCapacity, the capacity its group's checker holds it to, trying
// until it is set or c.end: a broken build that lets in more than its
// capacity.
func (c *soakEnv) raiseCapacity(s *semaphore.Semaphore) {
	for c.now() < c.end {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.SetCapacity(ctx, 3*soakCapacity)
		cancel()
		if err == nil {
			return
		}
	}
}

func (c *soakEnv) permitsOnce(s *semaphore.Semaphore) {
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 3*time.Second)
	defer cancel()
	n := 1 + c.rng.Int64N(soakCapacity)
	call := c.now()
	if err := s.Acquire(ctx, n); err != nil {
		c.say(soakEvent{kind: "fail", call: call, ret: c.now(), value: n})
		return
	}
	c.say(soakEvent{kind: "acq", call: call, ret: c.now(), value: n})
	var m int64
	if n < soakCapacity && c.rng.IntN(3) == 0 {
		m = 1 + c.rng.Int64N(soakCapacity-n)
		ecall := c.now()
		mctx, mcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := s.Acquire(mctx, m)
		mcancel()
		c.say(soakEvent{kind: "enter", call: ecall, ret: c.now(), ok: err == nil, known: true, value: m})
		if err != nil {
			m = 0
		}
	}
	time.Sleep(time.Duration(c.rng.IntN(5000)) * time.Microsecond)
	if m > 0 {
		lcall := c.now()
		err := s.Release(ctx, m)
		c.say(soakEvent{kind: "leave", call: lcall, ret: c.now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld), value: m})
	}
	ucall := c.now()
	c.say(soakEvent{kind: "rel?", call: ucall, value: n})
	err := s.Release(ctx, n)
	c.say(soakEvent{kind: "rel", call: ucall, ret: c.now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld), value: n})
}

// soakMultilock is a client of the multilock group: All over a mutex and
// an rwlock's write side on the first lock server and a fairlock on the
// second, each with the fixed lease, run by the exclusive loop. The
// register is fenced by the mutex's token (the member that guards it, as
// package multilock suggests).
func soakMultilock(c *soakEnv) error {
	return c.exclusiveLoop(soakAll(c.b, []any{mutex.WithLease(c.lease), fairlock.WithLease(c.lease), rwlock.WithLease(c.lease)}))
}

// soakAll is the multilock group's lock over b's two servers, with
// leases (a mutex option, a fairlock option, an rwlock option) or the
// defaults.
func soakAll(b []backend.Backend, leases []any) soakLocker {
	mo := []mutex.Option{mutex.WithLogger(nil)}
	fo := []fairlock.Option{fairlock.WithLogger(nil)}
	ro := []rwlock.Option{rwlock.WithLogger(nil)}
	if leases != nil {
		mo = append(mo, leases[0].(mutex.Option))
		fo = append(fo, leases[1].(fairlock.Option))
		ro = append(ro, leases[2].(rwlock.Option))
	}
	return allLocker{multilock.All(mutex.New(b[0], "soak-ml", mo...), fairlock.New(b[1], "soak-ml", fo...), rwlock.New(b[0], "soak-ml", ro...))}
}

// allLocker is a multilock as a soakLocker: its token is its mutex's.
type allLocker struct{ *multilock.Lock }

func (a allLocker) Token(ctx context.Context) (int64, error) {
	ts, err := a.Tokens(ctx)
	if err != nil {
		return 0, err
	}
	return ts[0], nil
}
