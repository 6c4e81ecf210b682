package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync/backend"
	bgoredis "github.com/dsyncgo/dsync/backend/goredis"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	brueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/mutex"
)

// Adapter is a dsync backend over one client library, for the adapter
// comparison: the same mutex over each.
type Adapter struct {
	Name string
	Note string
	// New returns a backend over a client of its own, and a function
	// that closes both.
	New func(addr string) (backend.Backend, func(), error)
}

// Adapters returns the shipped adapters, in report order; the first is
// the reference of the ratios.
func Adapters() []Adapter {
	return []Adapter{
		{Name: "redigo", Note: "backend/redigo over a *redis.Pool", New: func(addr string) (backend.Backend, func(), error) {
			pool := &redis.Pool{MaxIdle: 64, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
			b := bredigo.New(pool)
			return b, func() { b.Close(); pool.Close() }, nil
		}},
		{Name: "go-redis", Note: "backend/goredis over a *redis.Client", New: func(addr string) (backend.Backend, func(), error) {
			c := goredis.NewClient(&goredis.Options{Addr: addr})
			b := bgoredis.New(c)
			return b, func() { b.Close(); c.Close() }, nil
		}},
		{Name: "rueidis", Note: "backend/rueidis, rueidis defaults (auto-pipelining)", New: rueidisAdapter(false)},
		{Name: "rueidis-noauto", Note: "backend/rueidis, a client with DisableAutoPipelining", New: rueidisAdapter(true)},
	}
}

func rueidisAdapter(noAuto bool) func(addr string) (backend.Backend, func(), error) {
	return func(addr string) (backend.Backend, func(), error) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableAutoPipelining: noAuto, DisableCache: true})
		if err != nil {
			return nil, nil, err
		}
		b := brueidis.New(c)
		return b, func() { b.Close(); c.Close() }, nil
	}
}

// AdapterResult is what one adapter measured: lock+unlock times, per
// interleaved slice, uncontended with context.Background, uncontended
// with a context that carries a deadline (as a request handler's does),
// and by each of Parallel goroutines locking a name of its own.
type AdapterResult struct {
	Background, Deadline, Parallel Result
}

// Parallel is how many goroutines share one backend in the adapters'
// parallel run, each on a name of its own.
const Parallel = 8

// adapterRounds is how many interleaved rounds the adapter runs are split
// into.
const adapterRounds = 20

// runAdapters measures every adapter, n cycles of each kind, in
// interleaved rounds (see Run).
func runAdapters(ctx context.Context, addr string, n int, step func(string) error) (map[string]AdapterResult, error) {
	results := map[string]AdapterResult{}
	order := Adapters()
	for i := range adapterRounds {
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, a := range order {
			if err := step(fmt.Sprintf("adapters, round %d of %d: %s", i+1, adapterRounds, a.Name)); err != nil {
				return results, err
			}
			r, err := adapterRound(ctx, addr, a, max(Parallel, n/adapterRounds))
			if err != nil {
				return results, fmt.Errorf("adapter %s: %w", a.Name, err)
			}
			acc := results[a.Name]
			acc.Background.add(r.Background)
			acc.Deadline.add(r.Deadline)
			acc.Parallel.add(r.Parallel)
			results[a.Name] = acc
		}
	}
	return results, nil
}

// adapterRound runs n cycles of each kind on a fresh backend.
func adapterRound(ctx context.Context, addr string, a Adapter, n int) (AdapterResult, error) {
	b, closeAll, err := a.New(addr)
	if err != nil {
		return AdapterResult{}, err
	}
	defer closeAll()
	var r AdapterResult
	m := mutex.New(b, name("adapter"))
	cycles := func(ctx context.Context, m *mutex.Mutex, n int) error {
		for range n {
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			if err := m.UnlockContext(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	if err := cycles(ctx, m, 20); err != nil { // load scripts, fill pools
		return r, err
	}
	timed := func(ctx context.Context, into *Result) error {
		start := time.Now()
		err := cycles(ctx, m, n)
		*into = Result{Impl: a.Name, Acquisitions: int64(n), Elapsed: time.Since(start)}
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, Parallel)
	start := time.Now()
	for range Parallel {
		wg.Go(func() { errs <- cycles(ctx, mutex.New(b, name("parallel")), n/Parallel) })
	}
	wg.Wait()
	r.Parallel = Result{Impl: a.Name, Acquisitions: int64(n / Parallel * Parallel), Elapsed: time.Since(start)}
	close(errs)
	for err := range errs {
		if err != nil {
			return r, err
		}
	}
	// Then alone: a client that served concurrent calls once, as any in
	// a service has, may serve a lone call differently from a fresh one
	// (rueidis's auto-pipelining does).
	if err := timed(ctx, &r.Background); err != nil {
		return r, err
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := timed(dctx, &r.Deadline); err != nil {
		return r, err
	}
	return r, nil
}

// writeAdapters prints the adapter comparison, if it ran.
func (r *Report) writeAdapters(w io.Writer) {
	if len(r.Adapters) == 0 {
		return
	}
	ref := Adapters()[0].Name
	fmt.Fprintf(w, "adapters: the dsync mutex over each shipped adapter, one backend each, in %d interleaved rounds; time per lock+unlock (median of rounds), and its ratio to %s's (median of the rounds' ratios)\n", adapterRounds, ref)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tuncontended, Background\t\tuncontended, deadline\t\t%d goroutines, distinct names\t\t\n", Parallel)
	cell := func(a, ref Result) string {
		return fmt.Sprintf("%s\t%.2fx", us(percentile(a.PerOp, 0.5)), pairedRatio(a, ref))
	}
	for _, a := range Adapters() {
		res, base := r.Adapters[a.Name], r.Adapters[ref]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", a.Name, cell(res.Background, base.Background), cell(res.Deadline, base.Deadline), cell(res.Parallel, base.Parallel))
	}
	tw.Flush()
	// rueidis's auto-pipelining is a trade against go-redis's pooled
	// connections: say how it comes out, in the same rounds.
	g := r.Adapters["go-redis"]
	for _, name := range []string{"rueidis", "rueidis-noauto"} {
		res := r.Adapters[name]
		fmt.Fprintf(w, "  %s/go-redis: uncontended %.2fx (Background), %.2fx (deadline); %d goroutines %.2fx\n", name,
			pairedRatio(res.Background, g.Background), pairedRatio(res.Deadline, g.Deadline), Parallel, pairedRatio(res.Parallel, g.Parallel))
	}
	for _, a := range Adapters() {
		fmt.Fprintf(w, "  %-14s %s\n", a.Name, a.Note)
	}
	fmt.Fprintln(w)
}
