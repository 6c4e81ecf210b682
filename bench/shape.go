package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	rsredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/dsyncgo/dsync/backend"
	bgoredis "github.com/dsyncgo/dsync/backend/goredis"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	brueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
)

// The service-shape table: G goroutines of one process share one client
// (one redigo pool, one go-redis client, one rueidis client), as the
// request handlers of a service do, and each locks and unlocks a name of
// its own in a loop (an order id per request: nobody contends). It is the
// shape in which a shared Redis serves locks for a fleet, and in which
// round trips can be shared (pipelining). Each implementation runs G
// goroutines for a while on a fresh client, in rounds that alternate the
// implementations. Per pair it reports the rate, the server's CPU (INFO
// cpu), this process's CPU (getrusage: the clients run here), and the
// server's commands, scripts' included (INFO commandstats).

// ShapeImpl is a row of the service-shape table.
type ShapeImpl struct {
	Name string
	// Client is the client library the row runs over: its ratios are
	// to redsync over the same one, where there is such a row.
	Client string
	Note   string
	// Lock is false for the rows that take no lock (two PINGs per pair),
	// which the Background cells leave out: they pass no context.
	Lock bool
	// Open returns a client for g goroutines.
	Open func(addr string, g int) (*shapeClient, error)
}

// shapeClient is one shared client of a cell: each goroutine gets its
// pair from worker, once, for its name.
type shapeClient struct {
	worker func(name string) func(ctx context.Context) error
	close  func()
}

// Names of the rows the targets compare.
const (
	shapeRedsyncRedigo  = "redsync-redigo"
	shapeRedsyncGoRedis = "redsync-goredis"
	shapeRueidislock    = "rueidislock"
)

// ShapeImpls returns the rows of the service-shape table, in report order.
func ShapeImpls() []ShapeImpl {
	return []ShapeImpl{
		{Name: "ping-redigo", Client: "redigo", Note: "no lock: two PINGs per pair, each on a connection taken from the pool and put back (redigo Do, no context)", Open: openPingRedigo},
		{Name: "ping-rueidis", Client: "rueidis", Note: "no lock: two PINGs per pair through one rueidis client (auto-pipelining), with the pair's context", Open: openPingRueidis},
		{Name: "dsync-redigo", Client: "redigo", Lock: true, Note: "dsync mutex over backend/redigo, default options, a handle per goroutine", Open: openDsync(redigoBackend)},
		{Name: "dsync-goredis", Client: "go-redis", Lock: true, Note: "dsync mutex over backend/goredis, default options", Open: openDsync(goRedisBackend)},
		{Name: "dsync-rueidis", Client: "rueidis", Lock: true, Note: "dsync mutex over backend/rueidis, rueidis defaults (auto-pipelining), client-side caching off", Open: openDsync(rueidisBackend)},
		{Name: shapeRedsyncRedigo, Client: "redigo", Lock: true, Note: "redsync v4 over the redigo pool, defaults, a mutex per goroutine", Open: openRedsyncRedigo},
		{Name: shapeRedsyncGoRedis, Client: "go-redis", Lock: true, Note: "redsync v4 over the go-redis client (redis/goredis/v9), defaults", Open: openRedsyncGoRedis},
		{Name: "redislock", Client: "go-redis", Lock: true, Note: "bsm/redislock over the go-redis client, 8s TTL, no retry (nobody contends)", Open: openRedislock},
		{Name: shapeRueidislock, Client: "rueidis", Lock: true, Note: "rueidis/rueidislock, KeyMajority 1 (one key per lock, as every other row), TryNextAfter 1s (20ms fails slow calls), NoLoopTracking", Open: openRueidislock},
	}
}

// shapePool returns the redigo pool of a cell: every goroutine keeps a
// connection of its own, as a service sizes its pool for its concurrency.
func shapePool(addr string, g int) *redis.Pool {
	return &redis.Pool{
		MaxIdle:     max(g, 1),
		IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) { return redis.DialContext(ctx, "tcp", addr) },
	}
}

// shapeGoRedis returns the go-redis client of a cell: go-redis's default
// pool (10 connections per CPU), with deadlines on the socket (see
// backend/goredis), for every row over it alike.
func shapeGoRedis(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

func openPingRedigo(addr string, g int) (*shapeClient, error) {
	pool := shapePool(addr, g)
	ping := func() error {
		c := pool.Get()
		_, err := c.Do("PING")
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return &shapeClient{
		worker: func(string) func(context.Context) error {
			return func(context.Context) error {
				if err := ping(); err != nil {
					return err
				}
				return ping()
			}
		},
		close: func() { pool.Close() },
	}, nil
}

func openPingRueidis(addr string, _ int) (*shapeClient, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return &shapeClient{
		worker: func(string) func(context.Context) error {
			return func(ctx context.Context) error {
				if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
					return err
				}
				return c.Do(ctx, c.B().Ping().Build()).Error()
			}
		},
		close: c.Close,
	}, nil
}

// redigoBackend, goRedisBackend and rueidisBackend return a dsync backend
// over a client of a cell, and what closes both.
func redigoBackend(addr string, g int) (backend.Backend, func(), error) {
	pool := shapePool(addr, g)
	b := bredigo.New(pool)
	return b, func() { b.Close(); pool.Close() }, nil
}

func goRedisBackend(addr string, _ int) (backend.Backend, func(), error) {
	c := shapeGoRedis(addr)
	b := bgoredis.New(c)
	return b, func() { b.Close(); c.Close() }, nil
}

func rueidisBackend(addr string, _ int) (backend.Backend, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, nil, err
	}
	b := brueidis.New(c)
	return b, func() { b.Close(); c.Close() }, nil
}

// openDsync returns the Open of the dsync mutex over the backend that
// newBackend makes: one backend for all goroutines, a handle per
// goroutine on its name, made once and kept (see Handles in package
// dsync).
func openDsync(newBackend func(addr string, g int) (backend.Backend, func(), error)) func(addr string, g int) (*shapeClient, error) {
	return func(addr string, g int) (*shapeClient, error) {
		b, closeAll, err := newBackend(addr, g)
		if err != nil {
			return nil, err
		}
		return &shapeClient{
			worker: func(name string) func(context.Context) error {
				m := mutex.New(b, name)
				return func(ctx context.Context) error {
					if err := m.LockContext(ctx); err != nil {
						return err
					}
					return m.UnlockContext(ctx)
				}
			},
			close: closeAll,
		}, nil
	}
}

// redsyncWorker is the pair of a redsync mutex.
func redsyncWorker(rs *redsync.Redsync) func(name string) func(context.Context) error {
	return func(name string) func(context.Context) error {
		m := rs.NewMutex(name)
		return func(ctx context.Context) error {
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			_, err := m.UnlockContext(ctx)
			return err
		}
	}
}

func openRedsyncRedigo(addr string, g int) (*shapeClient, error) {
	pool := shapePool(addr, g)
	return &shapeClient{worker: redsyncWorker(redsync.New(rsredigo.NewPool(pool))), close: func() { pool.Close() }}, nil
}

func openRedsyncGoRedis(addr string, _ int) (*shapeClient, error) {
	c := shapeGoRedis(addr)
	return &shapeClient{worker: redsyncWorker(redsync.New(rsgoredis.NewPool(c))), close: func() { c.Close() }}, nil
}

func openRedislock(addr string, _ int) (*shapeClient, error) {
	c := shapeGoRedis(addr)
	lc := redislock.New(c)
	return &shapeClient{
		worker: func(name string) func(context.Context) error {
			return func(ctx context.Context) error {
				l, err := lc.Obtain(ctx, name, peerExpiry, nil)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			}
		},
		close: func() { c.Close() },
	}, nil
}

func openRueidislock(addr string, _ int) (*shapeClient, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:  1,
		// The time an acquiring call may take before the next key is
		// tried. With one key there is none, and its default, 20ms,
		// fails every acquisition whose round trip takes longer, as many
		// do with hundreds of goroutines on two CPUs: the acquisition then
		// waits for an invalidation that never comes, until the caller's
		// deadline.
		TryNextAfter:   time.Second,
		NoLoopTracking: true,
	})
	if err != nil {
		return nil, err
	}
	return &shapeClient{
		worker: func(name string) func(context.Context) error {
			return func(ctx context.Context) error {
				_, unlock, err := l.WithContext(ctx, name)
				if err != nil {
					return err
				}
				unlock() // releases the key, and returns once it did
				return nil
			}
		},
		close: l.Close,
	}, nil
}

// ShapeCell is what one implementation measured with G goroutines, called
// one way, in one round.
type ShapeCell struct {
	Pairs       int64
	Elapsed     time.Duration
	RedisCPU    time.Duration // INFO cpu delta
	ClientCPU   time.Duration // this process's CPU delta; 0 where it cannot be read
	ServerCalls int64         // INFO commandstats delta, scripts' commands included
}

// Rate returns pairs per second.
func (c ShapeCell) Rate() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(c.Pairs) / c.Elapsed.Seconds()
}

// shapeDeadline is the deadline of the context of each pair of the
// "deadline" caller.
const shapeDeadline = 5 * time.Second

// RunShapeCell runs impl with g goroutines sharing one fresh client, each
// locking and unlocking a name of its own, for d after all have warmed up;
// caller is "deadline" (a context with a deadline per pair, as a request
// handler calls) or "background" (context.Background()).
func RunShapeCell(ctx context.Context, addr string, impl ShapeImpl, g int, caller string, d time.Duration) (ShapeCell, error) {
	if g < 1 || d <= 0 {
		return ShapeCell{}, fmt.Errorf("shape: %d goroutines for %v; want at least one, for a while", g, d)
	}
	cl, err := impl.Open(addr, g)
	if err != nil {
		return ShapeCell{}, fmt.Errorf("%s: %w", impl.Name, err)
	}
	defer cl.close()
	pair := func(ctx context.Context, f func(context.Context) error) error {
		if caller != "deadline" {
			return f(ctx)
		}
		pctx, cancel := context.WithTimeout(ctx, shapeDeadline)
		defer cancel()
		return f(pctx)
	}
	var (
		ready, done sync.WaitGroup
		start       = make(chan struct{})
		stop        atomic.Bool
		pairs       atomic.Int64
		errMu       sync.Mutex
		errs        error // the first
		failed      int
	)
	fail := func(err error) {
		stop.Store(true)
		errMu.Lock()
		if failed++; errs == nil {
			errs = err
		}
		errMu.Unlock()
	}
	prefix := name("shape-" + impl.Name)
	for i := range g {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			f := cl.worker(fmt.Sprintf("%s:%d", prefix, i))
			// Warm up together, so that the client holds the
			// connections that g goroutines need before the clock runs.
			for range 3 {
				if err := pair(ctx, f); err != nil {
					fail(err)
					break
				}
			}
			ready.Done()
			<-start
			var n int64
			for !stop.Load() {
				if err := pair(ctx, f); err != nil {
					fail(err)
					break
				}
				n++
			}
			pairs.Add(n)
		}()
	}
	// errs, once the goroutines are done: the first error, and how many
	// goroutines failed.
	failure := func() error {
		if failed > 1 {
			return fmt.Errorf("%w (and %d more goroutines failed)", errs, failed-1)
		}
		return errs
	}
	ready.Wait()
	if stop.Load() { // a warm-up failed
		close(start)
		done.Wait()
		return ShapeCell{}, fmt.Errorf("%s, %d goroutines, warming up: %w", impl.Name, g, failure())
	}
	ad := admin{addr}
	calls0, err0 := ad.serverCalls()
	cpu0, err1 := ad.cpu()
	client0, _ := processCPU()
	t0 := time.Now()
	close(start)
	if err := errors.Join(err0, err1); err != nil {
		stop.Store(true)
		done.Wait()
		return ShapeCell{}, err
	}
	wait.Sleep(ctx, d)
	stop.Store(true)
	done.Wait()
	c := ShapeCell{Pairs: pairs.Load(), Elapsed: time.Since(t0)}
	client1, ok := processCPU()
	cpu1, err1 := ad.cpu()
	calls1, err0 := ad.serverCalls()
	if err := errors.Join(failure(), err0, err1); err != nil {
		return ShapeCell{}, fmt.Errorf("%s, %d goroutines: %w", impl.Name, g, err)
	}
	if ok {
		c.ClientCPU = client1 - client0
	}
	c.RedisCPU, c.ServerCalls = cpu1-cpu0, calls1-calls0
	return c, nil
}

// ShapeKey names a cell of the table: an implementation, a number of
// goroutines and a caller.
type ShapeKey struct {
	Impl   string
	G      int
	Caller string
}

// ShapeResult is the service-shape table: each cell's rounds, in order.
type ShapeResult struct {
	Rounds int
	Each   time.Duration
	Cells  map[ShapeKey][]ShapeCell
}

// ShapeBackgroundG is the number of goroutines at which the table also
// calls with context.Background(), when it runs that many.
const ShapeBackgroundG = 64

// shapeTargetG is the number of goroutines of the targets (DESIGN.md §7).
const shapeTargetG = 64

// RunShape measures every row of ShapeImpls with each number of goroutines
// in gs, rounds times for each for d, the rows alternating within a round
// and their order reversed every other round; with background goroutines
// (Run passes ShapeBackgroundG) the lock rows are also called with
// context.Background(). step is told of each cell before it runs; its
// error stops the run, which returns what it measured so far.
func RunShape(ctx context.Context, addr string, gs []int, background, rounds int, d time.Duration, step func(string) error) (ShapeResult, error) {
	res := ShapeResult{Rounds: rounds, Each: d, Cells: map[ShapeKey][]ShapeCell{}}
	type column struct {
		g      int
		caller string
	}
	var cols []column
	for _, g := range gs {
		cols = append(cols, column{g, "deadline"})
		if g == background {
			cols = append(cols, column{g, "background"})
		}
	}
	impls := ShapeImpls()
	for round := range rounds {
		order := slices.Clone(impls)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, col := range cols {
			for _, impl := range order {
				if col.caller == "background" && !impl.Lock {
					continue
				}
				if err := step(fmt.Sprintf("service shape, round %d of %d: %d goroutines, %s: %s", round+1, rounds, col.g, col.caller, impl.Name)); err != nil {
					return res, err
				}
				c, err := RunShapeCell(ctx, addr, impl, col.g, col.caller, d)
				if err != nil {
					return res, err
				}
				k := ShapeKey{impl.Name, col.g, col.caller}
				res.Cells[k] = append(res.Cells[k], c)
			}
		}
	}
	return res, nil
}

// pooled adds up the rounds of a cell.
func pooled(cs []ShapeCell) ShapeCell {
	var t ShapeCell
	for _, c := range cs {
		t.Pairs += c.Pairs
		t.Elapsed += c.Elapsed
		t.RedisCPU += c.RedisCPU
		t.ClientCPU += c.ClientCPU
		t.ServerCalls += c.ServerCalls
	}
	return t
}

// perPair returns d per pair of c.
func perPair(d time.Duration, c ShapeCell) time.Duration {
	if c.Pairs == 0 {
		return 0
	}
	return d / time.Duration(c.Pairs)
}

// shapeRatio returns the median, over the rounds both ran, of f of a's
// cell over f of b's in the same round; 0 if none.
func shapeRatio(a, b []ShapeCell, f func(ShapeCell) float64) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if fb := f(b[i]); fb > 0 {
			rs = append(rs, f(a[i])/fb)
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	if n := len(rs); n%2 == 0 {
		return (rs[n/2-1] + rs[n/2]) / 2
	}
	return rs[len(rs)/2]
}

func rate(c ShapeCell) float64         { return c.Rate() }
func redisCPUPair(c ShapeCell) float64 { return float64(perPair(c.RedisCPU, c)) }
func clientCPUPair(c ShapeCell) float64 {
	return float64(perPair(c.ClientCPU, c))
}

// sameClientRedsync returns the redsync row over the client of impl, or "".
func sameClientRedsync(impl ShapeImpl) string {
	switch impl.Client {
	case "redigo":
		return shapeRedsyncRedigo
	case "go-redis":
		return shapeRedsyncGoRedis
	}
	return ""
}

// usPair prints a per-pair duration in µs with a tenth.
func usPair(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}

func ratioCell(x float64) string {
	if x <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

// writeShape prints the service-shape table, if it ran.
func (r *Report) writeShape(w io.Writer) {
	s := r.Shape
	if len(s.Cells) == 0 {
		return
	}
	fmt.Fprintf(w, "service shape: G goroutines share one client (one redigo pool, go-redis client or rueidis client), each locking and unlocking a name of its own in a loop;\n")
	fmt.Fprintf(w, "  %d interleaved rounds of %v per row and G, each on a fresh client warmed up first; figures pooled over the rounds, ratios the median of the rounds' ratios;\n", s.Rounds, s.Each)
	fmt.Fprintf(w, "  callers: deadline = a context.WithTimeout(%v) per pair, as a request handler calls; background = context.Background() (at G=%d only);\n", shapeDeadline, ShapeBackgroundG)
	fmt.Fprintf(w, "  \"same client\" is redsync over the row's client library; CPU per pair: the server's (INFO cpu) and this process's, where the clients run (getrusage)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tpairs/s\t/redsync-redigo\tRedis CPU/pair\t/same client\tclient CPU/pair\t/same client\tserver cmds/pair\t")
	var keys []ShapeKey
	for k := range s.Cells {
		keys = append(keys, ShapeKey{G: k.G, Caller: k.Caller})
	}
	slices.SortFunc(keys, func(a, b ShapeKey) int {
		if a.G != b.G {
			return a.G - b.G
		}
		// deadline before background
		if a.Caller == b.Caller {
			return 0
		}
		if a.Caller == "deadline" {
			return -1
		}
		return 1
	})
	keys = slices.Compact(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "G=%d, %s\t\t\t\t\t\t\t\t\n", k.G, k.Caller)
		ref := s.Cells[ShapeKey{shapeRedsyncRedigo, k.G, k.Caller}]
		for _, impl := range ShapeImpls() {
			cs, ok := s.Cells[ShapeKey{impl.Name, k.G, k.Caller}]
			if !ok {
				continue
			}
			p := pooled(cs)
			same := s.Cells[ShapeKey{sameClientRedsync(impl), k.G, k.Caller}]
			fmt.Fprintf(tw, "  %s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.2f\t\n", impl.Name,
				p.Rate(), ratioCell(shapeRatio(cs, ref, rate)),
				usPair(perPair(p.RedisCPU, p)), ratioCell(shapeRatio(cs, same, redisCPUPair)),
				usPair(perPair(p.ClientCPU, p)), ratioCell(shapeRatio(cs, same, clientCPUPair)),
				float64(p.ServerCalls)/float64(max(1, p.Pairs)))
		}
	}
	tw.Flush()
	for _, impl := range ShapeImpls() {
		fmt.Fprintf(w, "  %-16s [%s] %s\n", impl.Name, impl.Client, impl.Note)
	}
	fmt.Fprintln(w)
}

// shapeTargets checks the service shape's targets (DESIGN.md §7) at
// shapeTargetG goroutines, with a deadline per pair.
func (r *Report) shapeTargets(w io.Writer, check func(ok bool, format string, args ...any)) {
	s := r.Shape
	if len(s.Cells) == 0 {
		return
	}
	cell := func(impl string) []ShapeCell { return s.Cells[ShapeKey{impl, shapeTargetG, "deadline"}] }
	if len(cell(shapeRedsyncRedigo)) == 0 {
		fmt.Fprintf(w, "  info   service shape: the targets are at %d goroutines, which this run did not measure\n", shapeTargetG)
		return
	}
	for _, pair := range [][2]string{{"dsync-redigo", shapeRedsyncRedigo}, {"dsync-goredis", shapeRedsyncGoRedis}} {
		d, p := cell(pair[0]), cell(pair[1])
		x := shapeRatio(d, p, rate)
		check(x >= 1, "service shape, %d goroutines: %s %.0f pairs/s = %.2fx %s's (target >= 1.0x)", shapeTargetG, pair[0], pooled(d).Rate(), x, pair[1])
		c := shapeRatio(d, p, redisCPUPair)
		check(c > 0 && c <= 1, "service shape, %d goroutines: %s Redis CPU %s per pair = %.2fx %s's (target <= 1.0x)", shapeTargetG, pair[0], usPair(perPair(pooled(d).RedisCPU, pooled(d))), c, pair[1])
	}
	best, bestRate := "", 0.0
	for _, impl := range ShapeImpls() {
		if impl.Lock && len(impl.Name) > 6 && impl.Name[:6] == "dsync-" {
			if x := pooled(cell(impl.Name)).Rate(); x > bestRate {
				best, bestRate = impl.Name, x
			}
		}
	}
	x := shapeRatio(cell(best), cell(shapeRedsyncRedigo), rate)
	check(x >= 1.5, "service shape, %d goroutines: the best dsync row, %s, %.0f pairs/s = %.2fx %s's (target >= 1.5x)", shapeTargetG, best, bestRate, x, shapeRedsyncRedigo)
	y := shapeRatio(cell(best), cell(shapeRueidislock), rate)
	check(y >= 1.2, "service shape, %d goroutines: the best dsync row, %s = %.2fx %s's (target >= 1.2x)", shapeTargetG, best, y, shapeRueidislock)
	for _, ping := range []string{"ping-redigo", "ping-rueidis"} {
		if p := cell(ping); len(p) > 0 {
			fmt.Fprintf(w, "  info   service shape, %d goroutines: %s, the machine's limit over its client, %.0f pairs/s; the best dsync row reached %.2fx of it\n",
				shapeTargetG, ping, pooled(p).Rate(), shapeRatio(cell(best), p, rate))
		}
	}
}
