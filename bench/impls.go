package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/observe"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// ErrGaveUp is returned by a peer's Lock that stopped trying: a failure, not
// a skip.
var ErrGaveUp = errors.New("gave up")

// Client is one contender of one implementation: a lock on one name, over
// connections of its own, as a process has, or over a client that it
// shares with the other goroutines of its process (see Impl.Shared).
type Client interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Close()
}

// Impl is an implementation under test.
type Impl struct {
	Name string
	Note string // its configuration, for the report
	New  func(addr, name string, c *counter) Client

	// Shared, if set, opens one client (one connection pool; for dsync
	// one backend on it) for contenders that are goroutines of one
	// process, as a service's goroutines share theirs. Each contender
	// gets its lock from newClient; its Close leaves the shared client
	// open, and closeAll closes it. Contended uses it for goroutines;
	// processes always have a client each.
	Shared sharedFunc
}

// sharedFunc is the type of Impl.Shared.
type sharedFunc func(addr string, c *counter) (newClient func(lock string) Client, closeAll func())

// peerExpiry is the peers' lock TTL: redsync's default.
const peerExpiry = 8 * time.Second

// Impls returns dsync and the peers, in report order.
func Impls() []Impl {
	return []Impl{
		{Name: "dsync", Note: "mutex, default options (30s watchdog lease, pub/sub wake-ups; 1ms threshold: hand-off once the head waited 1ms, or 3ms after its wake-up while holds are shorter)", New: newDsync},
		{Name: "dsync-handoff", Note: "mutex, WithHandoffAfter(0): every release with a waiter hands the mutex over (the behaviour before the two modes)", New: newDsyncHandoff},
		{Name: "dsync-fair", Note: "fairlock, default options: strict FIFO by server arrival, 5s waiter timeout", New: newDsyncFair},
		{Name: "redsync", Note: "redsync v4 defaults: 32 tries, 50-250ms random retry delay, 8s expiry", New: newRedsync(nil)},
		{Name: "redsync-1ms", Note: "redsync v4, 1ms retry delay, tries unlimited in practice", New: newRedsync([]redsync.Option{
			redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1 << 30)})},
		{Name: "redislock", Note: "bsm/redislock, the documented retry: every 100ms, 3 times; 8s TTL", New: newRedislock(func() redislock.RetryStrategy {
			return redislock.LimitRetry(redislock.LinearBackoff(100*time.Millisecond), 3)
		})},
		{Name: "redislock-1ms", Note: "bsm/redislock, retry every 1ms until the 8s TTL", New: newRedislock(func() redislock.RetryStrategy {
			return redislock.LinearBackoff(time.Millisecond)
		})},
	}
}

// GoroutineImpls returns the implementations whose contended rows also run
// with the contenders as goroutines of one process (see
// Config.GoroutineRows): the mutex in both modes, and redsync, each with
// its goroutines sharing one client (see Impl.Shared), where dsync's
// goroutines of one process queue locally (DESIGN.md §4).
func GoroutineImpls() []Impl {
	shared := map[string]sharedFunc{
		"dsync":         sharedDsync(),
		"dsync-handoff": sharedDsync(mutex.WithHandoffAfter(0)),
		"redsync":       sharedRedsync(nil),
	}
	var is []Impl
	for _, name := range []string{"dsync", "dsync-handoff", "redsync"} {
		i, _ := lookupImpl(name)
		i.Shared = shared[name]
		is = append(is, i)
	}
	return is
}

// ReadShare is the share of the read-write workload's cycles that only
// read.
const ReadShare = 0.9

// RWImpls returns the implementations of the read-write workload, in
// report order: the dsync mutex, for which every cycle is exclusive, the
// rwlock with ReadShare of its cycles reading, and the rwlock reading
// only (for the uncontended cost of a read).
func RWImpls() []Impl {
	return []Impl{
		{Name: "dsync", Note: "mutex: every cycle exclusive", New: newDsync},
		{Name: "dsync-rw", Note: "rwlock: 90% of cycles RLock/RUnlock, 10% Lock/Unlock", New: newDsyncRW(ReadShare)},
		{Name: "dsync-rlock", Note: "rwlock: RLock/RUnlock only", New: newDsyncRW(1)},
	}
}

// WLockImpl is the rwlock writing only (Lock/Unlock), for the uncontended
// cost of the write side.
var WLockImpl = Impl{Name: "dsync-wlock", Note: "rwlock: Lock/Unlock only", New: newDsyncRW(0)}

// dsyncMutexImpl returns the dsync mutex of Impls.
func dsyncMutexImpl() Impl {
	i, _ := lookupImpl("dsync")
	return i
}

// lookupImpl returns the implementation of Impls, RWImpls, SemImpl or
// ElectionImpl called name.
func lookupImpl(name string) (Impl, bool) {
	for _, i := range append(append(Impls(), RWImpls()...), SemImpl, ElectionImpl) {
		if i.Name == name {
			return i, true
		}
	}
	return Impl{}, false
}

type dsyncRWClient struct {
	pool    *redis.Pool
	b       *bredigo.Backend
	m       *rwlock.RWMutex
	reads   float64
	reading bool
}

func newDsyncRW(reads float64) func(addr, name string, c *counter) Client {
	return func(addr, name string, c *counter) Client {
		pool := redigoPool(addr, c)
		b := bredigo.New(pool)
		return &dsyncRWClient{pool: pool, b: b, m: rwlock.New(b, name), reads: reads}
	}
}

// Lock takes a read hold with the client's read share of the cycles, else
// the write hold; Unlock releases the side Lock took. A client runs one
// cycle at a time.
func (d *dsyncRWClient) Lock(ctx context.Context) error {
	d.reading = d.reads >= 1 || rand.Float64() < d.reads
	if d.reading {
		return d.m.RLockContext(ctx)
	}
	return d.m.LockContext(ctx)
}

func (d *dsyncRWClient) Unlock(ctx context.Context) error {
	if d.reading {
		return d.m.RUnlockContext(ctx)
	}
	return d.m.UnlockContext(ctx)
}

func (d *dsyncRWClient) Close() { d.b.Close(); d.pool.Close() }

type dsyncClient struct {
	pool *redis.Pool
	b    *bredigo.Backend
	m    *mutex.Mutex
}

func newDsync(addr, name string, c *counter) Client { return newDsyncMutex(addr, name, c) }

// newDsyncHandoff is the mutex that hands over at every release with a
// waiter.
func newDsyncHandoff(addr, name string, c *counter) Client {
	return newDsyncMutex(addr, name, c, mutex.WithHandoffAfter(0))
}

// newDsyncMutex returns the mutex on a backend of its own whose
// hand-offs count into c.
func newDsyncMutex(addr, name string, c *counter, opts ...mutex.Option) Client {
	pool := redigoPool(addr, c)
	b := bredigo.New(pool)
	observe.Set(b, handOffObserver(c))
	return &dsyncClient{pool: pool, b: b, m: mutex.New(b, name, opts...)}
}

func (d *dsyncClient) Lock(ctx context.Context) error   { return d.m.LockContext(ctx) }
func (d *dsyncClient) Unlock(ctx context.Context) error { return d.m.UnlockContext(ctx) }

// Close closes the client's backend and pool, unless it shares them (see
// sharedDsync).
func (d *dsyncClient) Close() {
	if d.pool != nil {
		observe.Set(d.b, nil)
		d.b.Close()
		d.pool.Close()
	}
}

// sharedDsync returns the Impl.Shared of the mutex with opts: one backend
// over one pool, whose hand-offs count into c.
func sharedDsync(opts ...mutex.Option) sharedFunc {
	return func(addr string, c *counter) (func(string) Client, func()) {
		pool := redigoPool(addr, c)
		b := bredigo.New(pool)
		observe.Set(b, handOffObserver(c))
		return func(lock string) Client { return &dsyncClient{m: mutex.New(b, lock, opts...)} },
			func() { observe.Set(b, nil); b.Close(); pool.Close() }
	}
}

type dsyncFairClient struct {
	pool *redis.Pool
	b    *bredigo.Backend
	m    *fairlock.Mutex
}

func newDsyncFair(addr, name string, c *counter) Client {
	pool := redigoPool(addr, c)
	b := bredigo.New(pool)
	observe.Set(b, handOffObserver(c))
	return &dsyncFairClient{pool: pool, b: b, m: fairlock.New(b, name)}
}

func (d *dsyncFairClient) Lock(ctx context.Context) error   { return d.m.LockContext(ctx) }
func (d *dsyncFairClient) Unlock(ctx context.Context) error { return d.m.UnlockContext(ctx) }
func (d *dsyncFairClient) Close()                           { observe.Set(d.b, nil); d.b.Close(); d.pool.Close() }

// redsyncClient is redsync over one server, or, for the RedLock scenario,
// over several (addr comma-separated), one pool each.
type redsyncClient struct {
	pools []*redis.Pool
	close func() // instead of pools, for another client library
	m     *redsync.Mutex
}

func newRedsync(opts []redsync.Option) func(addr, name string, c *counter) Client {
	return func(addr, name string, c *counter) Client {
		r := &redsyncClient{}
		var ps []rsredis.Pool
		for _, a := range addrs(addr) {
			pool := redigoPool(a, c)
			r.pools = append(r.pools, pool)
			ps = append(ps, rsredigo.NewPool(pool))
		}
		r.m = redsync.New(ps...).NewMutex(name, opts...)
		return r
	}
}

// sharedRedsync returns the Impl.Shared of redsync with opts over one
// pool.
func sharedRedsync(opts []redsync.Option) sharedFunc {
	return func(addr string, c *counter) (func(string) Client, func()) {
		pool := redigoPool(addr, c)
		rs := redsync.New(rsredigo.NewPool(pool))
		return func(lock string) Client { return &redsyncClient{m: rs.NewMutex(lock, opts...)} },
			func() { pool.Close() }
	}
}

func (r *redsyncClient) Lock(ctx context.Context) error {
	err := r.m.LockContext(ctx)
	if errors.Is(err, redsync.ErrFailed) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrGaveUp
	}
	return err
}

func (r *redsyncClient) Unlock(ctx context.Context) error {
	_, err := r.m.UnlockContext(ctx)
	return err
}

func (r *redsyncClient) Close() {
	if r.close != nil {
		r.close()
	}
	for _, p := range r.pools {
		p.Close()
	}
}

type redislockClient struct {
	cl    *goredis.Client
	lc    *redislock.Client
	name  string
	retry func() redislock.RetryStrategy
	held  *redislock.Lock
}

func newRedislock(retry func() redislock.RetryStrategy) func(addr, name string, c *counter) Client {
	return func(addr, name string, c *counter) Client {
		cl := goRedisClient(addr, c)
		return &redislockClient{cl: cl, lc: redislock.New(cl), name: name, retry: retry}
	}
}

func (r *redislockClient) Lock(ctx context.Context) error {
	l, err := r.lc.Obtain(ctx, r.name, peerExpiry, &redislock.Options{RetryStrategy: r.retry()})
	if errors.Is(err, redislock.ErrNotObtained) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrGaveUp
	}
	if err != nil {
		return err
	}
	r.held = l
	return nil
}

func (r *redislockClient) Unlock(ctx context.Context) error {
	l := r.held
	r.held = nil
	if l == nil {
		return errors.New("redislock: unlock without lock")
	}
	return l.Release(ctx)
}

func (r *redislockClient) Close() { r.cl.Close() }

// SemaphoreCapacity is the capacity of the semaphore scenario (DESIGN.md
// §7: capacity 4).
const SemaphoreCapacity = 4

// SemImpl is dsync's semaphore as a Client: Lock acquires one of
// SemaphoreCapacity permits, Unlock gives it back. It runs in the
// semaphore scenario only, beside the dsync mutex.
var SemImpl = Impl{Name: "dsync-sem4", Note: "semaphore, capacity 4, default options: Acquire(1), Release(1)", New: newDsyncSem}

type dsyncSemClient struct {
	pool *redis.Pool
	b    *bredigo.Backend
	s    *semaphore.Semaphore
}

func newDsyncSem(addr, name string, c *counter) Client {
	pool := redigoPool(addr, c)
	b := bredigo.New(pool)
	return &dsyncSemClient{pool: pool, b: b, s: semaphore.New(b, name, SemaphoreCapacity)}
}

func (d *dsyncSemClient) Lock(ctx context.Context) error   { return d.s.Acquire(ctx, 1) }
func (d *dsyncSemClient) Unlock(ctx context.Context) error { return d.s.Release(ctx, 1) }
func (d *dsyncSemClient) Close()                           { d.b.Close(); d.pool.Close() }
