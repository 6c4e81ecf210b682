package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"

	dgoredis "github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/mutex"
)

// The interleaved uncontended table: every implementation's lock+unlock,
// alone, called as a request handler calls (a context with a deadline) and
// as sync.Locker does (context.Background()), in rounds that alternate
// the implementations, so that a machine that drifts between fast and
// slow spells weighs on all of them alike. Per pair it reports the time,
// the server's CPU (INFO cpu), the server's commands, scripts' included
// (INFO commandstats), the round trips and the client's allocations.
// Ratios to a peer are the median of the rounds' ratios: the server's CPU
// per pair drifts with the machine by more than the implementations
// differ (a round's figure ranged 31-166µs beside a CI run), and a ratio
// within one round compares the two under the same conditions.

// Callers are how an uncontended pair is called.
var Callers = []string{"deadline", "background"}

// UncontendedRow is what one implementation cost per pair, called one way:
// medians over the rounds.
type UncontendedRow struct {
	Impl, Caller string
	Time         time.Duration
	RedisCPU     time.Duration
	ScriptTime   time.Duration // the server's time running scripts (INFO commandstats)
	ServerCalls  float64
	RoundTrips   float64
	Allocs       float64

	// The rounds' figures, in order, for ratios to a peer's.
	times, cpus []time.Duration
}

// ratio returns the median of the rounds' ratios of u's time (cpu false)
// or Redis CPU (cpu true) to peer's (see pairedMedian).
func (u UncontendedRow) ratio(peer UncontendedRow, cpu bool) float64 {
	if cpu {
		return pairedMedian(u.cpus, peer.cpus)
	}
	return pairedMedian(u.times, peer.times)
}

// UncontendedImpls returns the implementations of the interleaved table:
// each dsync primitive on redigo (the election's Campaign+Resign as its
// pair), the mutex on go-redis too, and the peers.
func UncontendedImpls() []Impl {
	pick := func(name string) Impl {
		i, _ := lookupImpl(name)
		return i
	}
	return []Impl{
		pick("dsync"),
		{Name: "dsync-goredis", Note: "mutex over backend/goredis, default options", New: newDsyncGoRedis},
		pick("dsync-fair"),
		{Name: "dsync-rwlock-w", Note: "rwlock: Lock/Unlock only", New: newDsyncRW(0)},
		pick("dsync-rlock"),
		SemImpl,
		ElectionImpl,
		pick("redsync"),
		{Name: "redsync-goredis", Note: "redsync v4 defaults over the go-redis client", New: newRedsyncGoRedis},
		pick("redislock"),
	}
}

// sameClient returns the redsync row over impl's client library.
func sameClient(impl string) string {
	switch impl {
	case "dsync-goredis", "redsync-goredis", "redislock":
		return "redsync-goredis"
	}
	return "redsync"
}

func newRedsyncGoRedis(addr, name string, c *counter) Client {
	cl := goRedisClient(addr, c)
	return &redsyncClient{m: redsync.New(rsgoredis.NewPool(cl)).NewMutex(name), close: func() { cl.Close() }}
}

type dsyncGoRedisClient struct {
	cl *goredis.Client
	b  *dgoredis.Backend
	m  *mutex.Mutex
}

func newDsyncGoRedis(addr, name string, c *counter) Client {
	cl := goRedisClient(addr, c)
	b := dgoredis.New(cl)
	return &dsyncGoRedisClient{cl: cl, b: b, m: mutex.New(b, name)}
}

func (d *dsyncGoRedisClient) Lock(ctx context.Context) error   { return d.m.LockContext(ctx) }
func (d *dsyncGoRedisClient) Unlock(ctx context.Context) error { return d.m.UnlockContext(ctx) }
func (d *dsyncGoRedisClient) Close()                           { d.b.Close(); d.cl.Close() }

// clientsPerImpl is how many clients, each with connections of its own,
// take turns for an implementation, one per round: on this VM a
// connection keeps a latency of its own for its life (identical clients
// measured 10-15% apart in one run), which one client per implementation
// would count as the implementation's.
const clientsPerImpl = 4

// UncontendedInterleaved measures impls in rounds of perRound pairs each,
// for every caller, the implementations alternating within a round and
// their order rotating from one round to the next.
func UncontendedInterleaved(ctx context.Context, addr string, impls []Impl, rounds, perRound int) ([]UncontendedRow, error) {
	type cell struct {
		time, cpu, script   []time.Duration
		calls, rtts, allocs []float64
	}
	cells := make(map[[2]string]*cell)
	clients := make([][clientsPerImpl]Client, len(impls))
	counters := make([]*counter, len(impls))
	for i, impl := range impls {
		counters[i] = new(counter)
		for j := range clientsPerImpl {
			c := impl.New(addr, name("uncontended-"+impl.Name), counters[i])
			clients[i][j] = c
			defer c.Close()
			for range 20 { // load scripts, fill the pool
				if err := cycle(ctx, c, 0); err != nil {
					return nil, fmt.Errorf("%s: %w", impl.Name, err)
				}
			}
		}
	}
	ad := admin{addr}
	var ms runtime.MemStats
	for round := range rounds {
		for k := range impls {
			i := (k + round) % len(impls)
			cl := clients[i][round%clientsPerImpl]
			// The client sat idle for rounds: a dsync session gave up its
			// watch subscription meanwhile, as an idle process's does. The
			// table is of the steady state, so that is not measured.
			for range 5 {
				if err := cycle(ctx, cl, 0); err != nil {
					return nil, fmt.Errorf("%s: %w", impls[i].Name, err)
				}
			}
			for _, caller := range Callers {
				calls0, err := ad.serverCalls()
				if err != nil {
					return nil, err
				}
				script0, err := ad.scriptTime()
				if err != nil {
					return nil, err
				}
				cpu0, err := ad.cpu()
				if err != nil {
					return nil, err
				}
				rtts0 := counters[i].roundTrips.Load()
				runtime.ReadMemStats(&ms)
				mallocs0 := ms.Mallocs
				start := time.Now()
				for range perRound {
					cctx := ctx
					cancel := context.CancelFunc(func() {})
					if caller == "deadline" {
						cctx, cancel = context.WithTimeout(ctx, 5*time.Second)
					}
					err := cycle(cctx, cl, 0)
					cancel()
					if err != nil {
						return nil, fmt.Errorf("%s: %w", impls[i].Name, err)
					}
				}
				elapsed := time.Since(start)
				runtime.ReadMemStats(&ms)
				mallocs := ms.Mallocs - mallocs0
				cpu1, err := ad.cpu()
				if err != nil {
					return nil, err
				}
				script1, err := ad.scriptTime()
				if err != nil {
					return nil, err
				}
				calls1, err := ad.serverCalls()
				if err != nil {
					return nil, err
				}
				c := cells[[2]string{impls[i].Name, caller}]
				if c == nil {
					c = new(cell)
					cells[[2]string{impls[i].Name, caller}] = c
				}
				n := float64(perRound)
				c.time = append(c.time, elapsed/time.Duration(perRound))
				c.cpu = append(c.cpu, (cpu1-cpu0)/time.Duration(perRound))
				c.script = append(c.script, (script1-script0)/time.Duration(perRound))
				c.calls = append(c.calls, float64(calls1-calls0)/n)
				c.rtts = append(c.rtts, float64(counters[i].roundTrips.Load()-rtts0)/n)
				allocs := float64(mallocs) / n
				if caller == "deadline" {
					allocs -= deadlineCtxAllocs
				}
				c.allocs = append(c.allocs, allocs)
			}
		}
	}
	var rows []UncontendedRow
	for _, impl := range impls {
		for _, caller := range Callers {
			c := cells[[2]string{impl.Name, caller}]
			rows = append(rows, UncontendedRow{
				Impl: impl.Name, Caller: caller,
				Time: median(c.time), RedisCPU: median(c.cpu), ScriptTime: median(c.script),
				ServerCalls: medianF(c.calls), RoundTrips: medianF(c.rtts), Allocs: medianF(c.allocs),
				times: c.time, cpus: c.cpu,
			})
		}
	}
	return rows, nil
}

// deadlineCtxAllocs is what context.WithTimeout itself allocates, which
// the caller, not the implementation, spends: subtracted from the
// allocations of the "deadline" caller.
var deadlineCtxAllocs = func() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	const n = 1000
	for range n {
		_, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cancel()
	}
	runtime.ReadMemStats(&ms)
	return float64(ms.Mallocs-before) / n
}()

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianF(fs []float64) float64 {
	s := slices.Clone(fs)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpu returns the server's CPU time so far, system and user (INFO cpu).
func (a admin) cpu() (time.Duration, error) {
	s, err := redis.String(a.do("INFO", "cpu"))
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu line %q: %w", line, err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}

// row returns the row of impl and caller, and whether there is one.
func (r *Report) row(impl, caller string) (UncontendedRow, bool) {
	for _, u := range r.Uncont {
		if u.Impl == impl && u.Caller == caller {
			return u, true
		}
	}
	return UncontendedRow{}, false
}

// writeUncontended prints the interleaved uncontended table.
func (r *Report) writeUncontended(w io.Writer) {
	if len(r.Uncont) == 0 {
		return
	}
	fmt.Fprintf(w, "uncontended lock+unlock (acquire+release), alone: %d interleaved rounds of %d pairs per implementation and caller, %d clients per implementation taking turns; medians per pair\n",
		uncontendedRounds, max(1, r.Config.Uncontended/uncontendedRounds), clientsPerImpl)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcaller\ttime\t/redsync\t/redislock\tredis CPU\t/same client\tscripts\tserver cmds\tround trips\tallocs\t")
	for _, u := range r.Uncont {
		rs, _ := r.row("redsync", u.Caller)
		rl, _ := r.row("redislock", u.Caller)
		sc, _ := r.row(sameClient(u.Impl), u.Caller)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1fµs\t%.1f\t%.2f\t%.1f\t\n", u.Impl, u.Caller,
			us(u.Time), ratioCell(u.ratio(rs, false)), ratioCell(u.ratio(rl, false)),
			us(u.RedisCPU), ratioCell(u.ratio(sc, true)), float64(u.ScriptTime)/float64(time.Microsecond), u.ServerCalls, u.RoundTrips, u.Allocs)
	}
	tw.Flush()
	fmt.Fprintln(w, "  callers: deadline = a context.WithTimeout(5s) per pair, as a request handler calls (its own allocations not counted);")
	fmt.Fprintln(w, "  background = context.Background(), as sync.Locker calls. Allocations are this process's, the client library's included.")
	fmt.Fprintln(w, "  scripts: the server's time running scripts (EVALSHA, the commands they call included; INFO commandstats usec), without the I/O.")
	fmt.Fprintln(w, "  Ratios: the median of the rounds' ratios (not the ratio of the medians printed); \"same client\" is redsync over the row's client")
	fmt.Fprintln(w, "  library (go-redis for dsync-goredis and redislock, otherwise redigo); \"-\" where the peer's row did not run.")
	fmt.Fprintln(w)
}

// uncontendedTargets checks the hot path's budget (DESIGN.md §7) against
// the interleaved table.
func (r *Report) uncontendedTargets(check func(ok bool, format string, args ...any)) {
	if len(r.Uncont) == 0 {
		return
	}
	budget := func(u UncontendedRow) {
		check(u.RoundTrips <= 2, "%s, %s: uncontended %.2f round trips per pair (target 2)", u.Impl, u.Caller, u.RoundTrips)
		// The count is the server's, every client's included: the idle
		// clients' sessions ending their watch subscriptions, a few
		// commands a second, add thousandths per pair. It is checked as
		// printed, to a tenth.
		check(math.Round(u.ServerCalls*10) <= 40, "%s, %s: uncontended %.1f server commands per pair, scripts' included (target <= 4)", u.Impl, u.Caller, u.ServerCalls)
		check(u.Allocs <= 25, "%s, %s: uncontended %.1f allocations per pair (target <= 25)", u.Impl, u.Caller, u.Allocs)
	}
	for _, caller := range Callers {
		rs, ok1 := r.row("redsync", caller)
		rl, ok2 := r.row("redislock", caller)
		for _, impl := range []string{"dsync", "dsync-goredis"} {
			u, ok := r.row(impl, caller)
			if !ok {
				continue
			}
			sc, ok3 := r.row(sameClient(impl), caller)
			if !ok1 || !ok2 || !ok3 {
				check(false, "%s, %s: uncontended: a peer's row (redsync, redislock, %s) did not run, so the targets against it are not checked", impl, caller, sameClient(impl))
				continue
			}
			budget(u)
			check(u.ratio(rs, false) <= 1.05, "%s, %s: uncontended time %s = %.2fx redsync's (target <= 1.05x)", impl, caller, us(u.Time), u.ratio(rs, false))
			check(u.ratio(rl, false) <= 1.2, "%s, %s: uncontended time %.2fx bsm/redislock's (target <= 1.2x)", impl, caller, u.ratio(rl, false))
			check(u.ratio(sc, true) <= 1.0, "%s, %s: uncontended Redis CPU %s = %.2fx %s's (target <= 1.0x)", impl, caller, us(u.RedisCPU), u.ratio(sc, true), sc.Impl)
		}
		mu, ok := r.row("dsync", caller)
		if !ok {
			continue
		}
		for _, impl := range []string{"dsync-fair", "dsync-rwlock-w", "dsync-rlock", SemImpl.Name, ElectionImpl.Name} {
			u, ok := r.row(impl, caller)
			if !ok {
				continue
			}
			budget(u)
			check(u.ratio(mu, false) <= 1.1, "%s, %s: uncontended time %.2fx the mutex's (target <= 1.1x)", impl, caller, u.ratio(mu, false))
			check(u.ratio(mu, true) <= 1.1, "%s, %s: uncontended Redis CPU %.2fx the mutex's (target <= 1.1x)", impl, caller, u.ratio(mu, true))
		}
	}
}
