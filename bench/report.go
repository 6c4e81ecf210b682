// Package bench measures dsync against its peers, redsync, bsm/redislock
// and rueidislock, in one run on one server: uncontended lock+unlock, the
// service shape (many goroutines sharing one client, each on a name of its
// own; see RunShape), contention with and without a critical section (the
// mutex in both of its modes), handoff latency, and, for dsync, 10,000
// waiters on one lock and 10,000 locks held at once. Measurements without
// a lock bound what any lock can do on the machine: Floor, for a handoff,
// Ring, for the contended rate, and two PINGs per pair in the service
// shape. RequiredRate models what the contended targets without a
// critical section require together.
//
// The same scenarios back the Go benchmarks in this package
// (go test -bench . ./bench) and the comparison table of `dsync bench`.
//
// Commands are counted two ways. Client commands are what the clients
// send, counted on their connections (pub/sub SUBSCRIBE and UNSUBSCRIBE
// included); round trips are those whose reply the client waits for.
// Server calls are the INFO commandstats delta, which also counts every
// command a script runs: an uncontended dsync lock is one EVALSHA sent,
// with three calls inside it (GET, SET, and the SET recording the fencing
// token), and its unlock one with two (GET and SET).
//
// Contenders, and the waiter of a handoff, run in processes of their own
// when Config.Spawn is set, as the clients of a shared lock usually do;
// otherwise they share this process, where dsync's mutex queues waiters
// behind a hold of their own process without asking the server.
package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dsyncgo/dsync/internal/lease"
)

// Config sets what Run measures.
type Config struct {
	Addr        string        // the server; every implementation uses it
	Duration    time.Duration // per contended scenario and implementation
	Contenders  int
	Hold        time.Duration // critical section of the second contended scenario
	Uncontended int           // lock+unlock cycles
	// Adapters is how many lock+unlock cycles of each kind the adapter
	// comparison runs per adapter (see Adapters; 0 to skip).
	Adapters int
	Handoffs int
	Waiters  int // dsync: waiters on one lock
	Held     int // dsync: locks held at once
	// SemContenders contend for one permit each of a semaphore of
	// SemaphoreCapacity, beside the dsync mutex with as many, holding for
	// Hold (0 to skip).
	SemContenders int
	// RedLockAddrs, if not empty, are independent servers for the RedLock
	// scenario (see RedLockImpls): Uncontended/10 cycles and Contenders
	// at Hold, in-process.
	RedLockAddrs []string
	// Spawn, if set, runs each contender of the contended scenarios in a
	// process of its own (see Worker); otherwise they are goroutines of
	// this process.
	Spawn Spawn
	// GoroutineRows, with Spawn set, also runs the contended scenarios of
	// GoroutineImpls, with the contenders as goroutines of this process
	// sharing one client per implementation, and the semaphore scenario
	// with the contenders as goroutines, each with a client of its own.
	GoroutineRows bool

	// The service-shape table (see RunShape): ShapeRounds interleaved
	// rounds of ShapeDuration per row and number of goroutines in
	// ShapeGoroutines; 0 rounds skip it.
	ShapeGoroutines []int
	ShapeDuration   time.Duration
	ShapeRounds     int
	// ShapeOnly measures the service-shape table and nothing else.
	ShapeOnly bool

	Progress func(string)
}

// uncontendedRounds is how many interleaved rounds the uncontended cycles
// are split into.
const uncontendedRounds = 20

// DefaultConfig returns the settings of `dsync bench` without flags.
func DefaultConfig() Config {
	return Config{
		Duration:    5 * time.Second,
		Contenders:  8,
		Hold:        time.Millisecond,
		Uncontended: 5000,
		Adapters:    2000,
		Handoffs:    40,
		Waiters:     10000,
		Held:        10000,

		SemContenders: 16,
		GoroutineRows: true,

		ShapeGoroutines: []int{1, 16, 64, 256},
		ShapeDuration:   300 * time.Millisecond,
		ShapeRounds:     3,
	}
}

// Report holds one run's results.
type Report struct {
	Config    Config
	Server    string
	RoundTrip time.Duration
	Floor     Floor
	Impls     []Impl
	Cont0     map[string]Result
	ContHold  map[string]Result
	// The contended scenarios of GoroutineImpls with the contenders as
	// goroutines of this process (see Config.GoroutineRows).
	GoCont0    map[string]Result
	GoContHold map[string]Result
	Ring       float64 // hand-offs/s of the ring (see Ring) at Hold; 0 if not run
	Handoff    map[string]Result
	Waiters    WaitersResult
	Held       HeldResult
	HeldSmall  HeldResult

	// Uncont is the interleaved uncontended table (see
	// UncontendedInterleaved), by implementation and caller.
	Uncont []UncontendedRow

	// The read-write workload (see RWImpls): Contenders at Hold, by
	// implementation.
	RW map[string]Result

	Sem map[string]Result // the semaphore scenario: "dsync" (the mutex) and SemImpl
	// GoSem is the semaphore scenario with the contenders as goroutines
	// of this process, when Sem's were processes (see
	// Config.GoroutineRows).
	GoSem map[string]Result

	RedLock map[string]RedLockResult // by implementation (see RedLockImpls)

	Adapters map[string]AdapterResult // by adapter (see Adapters)

	Election ElectionResult // the election beside the mutex (see Election)

	Shape ShapeResult // the service-shape table (see RunShape)
}

// Run measures everything in cfg. The implementations' calls run with a
// context that cannot be cancelled, as the peers ignore theirs for I/O and
// a cancellable one costs dsync's redigo adapter a goroutine per call; ctx
// ending is noticed between steps, and Run then returns what it measured
// so far with ctx's error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	stop := ctx
	ctx = context.WithoutCancel(ctx)
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	ad := admin{cfg.Addr}
	rep := &Report{Config: cfg, Server: "redis " + ad.version() + " at " + cfg.Addr, Impls: Impls(),
		Cont0: map[string]Result{}, ContHold: map[string]Result{}, GoCont0: map[string]Result{}, GoContHold: map[string]Result{},
		Handoff: map[string]Result{},
		RW:      map[string]Result{}, Sem: map[string]Result{}, GoSem: map[string]Result{}, RedLock: map[string]RedLockResult{}}
	var err error
	if rep.RoundTrip, err = ad.roundTrip(ctx); err != nil {
		return nil, err
	}
	// fail returns the partial report if the error came of stop's end,
	// which the worker processes are stopped by too.
	fail := func(err error) (*Report, error) {
		if cerr := stop.Err(); cerr != nil {
			return rep, cerr
		}
		return nil, err
	}
	// step reports stop's end, after which Run returns the partial report.
	step := func(what string) error {
		if err := stop.Err(); err != nil {
			return err
		}
		progress(what)
		return nil
	}
	runShape := func() error {
		if cfg.ShapeRounds <= 0 || len(cfg.ShapeGoroutines) == 0 {
			return nil
		}
		var err error
		rep.Shape, err = RunShape(ctx, cfg.Addr, cfg.ShapeGoroutines, ShapeBackgroundG, cfg.ShapeRounds, cfg.ShapeDuration, step)
		return err
	}
	if cfg.ShapeOnly {
		if err := runShape(); err != nil {
			return fail(err)
		}
		return rep, nil
	}
	if err := step("round trips and pub/sub delivery from idle"); err != nil {
		return rep, err
	}
	if rep.Floor, err = ad.floor(ctx, 40); err != nil {
		return fail(err)
	}
	// Uncontended runs are short and this kind of machine drifts between
	// fast and slow spells, so they are interleaved (see
	// UncontendedInterleaved).
	if err := step(fmt.Sprintf("uncontended lock+unlock, %d interleaved rounds", uncontendedRounds)); err != nil {
		return rep, err
	}
	if rep.Uncont, err = UncontendedInterleaved(ctx, cfg.Addr, UncontendedImpls(), uncontendedRounds, max(1, cfg.Uncontended/uncontendedRounds)); err != nil {
		return fail(fmt.Errorf("uncontended: %w", err))
	}
	if cfg.Adapters > 0 {
		if rep.Adapters, err = runAdapters(ctx, cfg.Addr, cfg.Adapters, step); err != nil {
			return fail(err)
		}
	}
	if err := runShape(); err != nil {
		return fail(err)
	}
	// Contended runs are interleaved for the same reason, in rounds of a
	// fifth of the duration, in the same alternating order.
	const rounds = 5
	for _, sc := range []struct {
		hold time.Duration
		into map[string]Result
	}{{0, rep.Cont0}, {cfg.Hold, rep.ContHold}} {
		for i := 0; i < rounds; i++ {
			order := slices.Clone(rep.Impls)
			if i%2 == 1 {
				slices.Reverse(order)
			}
			for _, impl := range order {
				if err := step(fmt.Sprintf("%d contenders, %v hold, round %d of %d: %s", cfg.Contenders, sc.hold, i+1, rounds, impl.Name)); err != nil {
					return rep, err
				}
				r, err := Contended(ctx, cfg.Addr, impl, cfg.Contenders, sc.hold, cfg.Duration/rounds, 0, cfg.Spawn)
				if err != nil {
					return fail(fmt.Errorf("%s contended: %w", impl.Name, err))
				}
				acc := sc.into[impl.Name]
				acc.add(r)
				sc.into[impl.Name] = acc
			}
			if sc.hold == cfg.Hold && cfg.Hold > 0 && cfg.Contenders > 1 {
				if err := step(fmt.Sprintf("%d contenders, %v hold, round %d of %d: hand-off ring", cfg.Contenders, sc.hold, i+1, rounds)); err != nil {
					return rep, err
				}
				ring, err := Ring(ctx, cfg.Addr, cfg.Contenders, sc.hold, cfg.Duration/rounds, cfg.Spawn)
				if err != nil {
					return fail(fmt.Errorf("hand-off ring: %w", err))
				}
				rep.Ring += ring / rounds
			}
		}
	}
	// The mutex's rows again with the contenders as goroutines of this
	// process, interleaved the same way.
	if cfg.Spawn != nil && cfg.GoroutineRows {
		for _, sc := range []struct {
			hold time.Duration
			into map[string]Result
		}{{0, rep.GoCont0}, {cfg.Hold, rep.GoContHold}} {
			for i := 0; i < rounds; i++ {
				order := GoroutineImpls()
				if i%2 == 1 {
					slices.Reverse(order)
				}
				for _, impl := range order {
					if err := step(fmt.Sprintf("%d contenders as goroutines sharing a client, %v hold, round %d of %d: %s", cfg.Contenders, sc.hold, i+1, rounds, impl.Name)); err != nil {
						return rep, err
					}
					r, err := Contended(ctx, cfg.Addr, impl, cfg.Contenders, sc.hold, cfg.Duration/rounds, 0, nil)
					if err != nil {
						return fail(fmt.Errorf("%s contended, goroutines: %w", impl.Name, err))
					}
					acc := sc.into[impl.Name]
					acc.add(r)
					sc.into[impl.Name] = acc
				}
			}
		}
	}
	// The read-write workload, interleaved the same way.
	rw := RWImpls()
	for i := 0; i < rounds && cfg.Contenders > 1; i++ {
		order := slices.Clone(rw)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, impl := range order {
			if err := step(fmt.Sprintf("read-write: %d contenders, %v hold, round %d of %d: %s", cfg.Contenders, cfg.Hold, i+1, rounds, impl.Name)); err != nil {
				return rep, err
			}
			// Readers alone never wait; their rate calibrates the
			// rwlock's queueing model (see RWCeiling).
			r, err := Contended(ctx, cfg.Addr, impl, cfg.Contenders, cfg.Hold, cfg.Duration/rounds, 0, cfg.Spawn)
			if err != nil {
				return fail(fmt.Errorf("%s read-write: %w", impl.Name, err))
			}
			acc := rep.RW[impl.Name]
			acc.add(r)
			rep.RW[impl.Name] = acc
		}
	}
	for _, impl := range rep.Impls {
		if err := step(fmt.Sprintf("handoff, %d rounds: %s", cfg.Handoffs, impl.Name)); err != nil {
			return rep, err
		}
		if rep.Handoff[impl.Name], err = Handoff(ctx, cfg.Addr, impl, cfg.Handoffs, cfg.Spawn); err != nil {
			return fail(fmt.Errorf("%s handoff: %w", impl.Name, err))
		}
	}
	if rep.Election, err = Election(ctx, cfg.Addr, cfg.Uncontended/4, cfg.Handoffs, cfg.Spawn, step); err != nil {
		return fail(fmt.Errorf("election: %w", err))
	}
	if cfg.SemContenders > 0 {
		// The semaphore against the mutex, interleaved as above; with the
		// contenders in processes, again as goroutines, where its p99
		// target is set (DESIGN.md §7: with 16 processes on 2 vCPUs the
		// scheduler's tail is the semaphore's).
		type placement struct {
			spawn Spawn
			into  map[string]Result
			how   string
		}
		placements := []placement{{cfg.Spawn, rep.Sem, ""}}
		if cfg.Spawn != nil && cfg.GoroutineRows {
			placements = append(placements, placement{nil, rep.GoSem, " as goroutines"})
		}
		for _, pl := range placements {
			pair := []Impl{dsyncMutexImpl(), SemImpl}
			for i := 0; i < rounds; i++ {
				if i%2 == 1 {
					slices.Reverse(pair)
				}
				for _, impl := range pair {
					if err := step(fmt.Sprintf("semaphore scenario: %d contenders%s, %v hold, round %d of %d: %s", cfg.SemContenders, pl.how, cfg.Hold, i+1, rounds, impl.Name)); err != nil {
						return rep, err
					}
					r, err := Contended(ctx, cfg.Addr, impl, cfg.SemContenders, cfg.Hold, cfg.Duration/rounds, 0, pl.spawn)
					if err != nil {
						return fail(fmt.Errorf("%s contended%s: %w", impl.Name, pl.how, err))
					}
					acc := pl.into[impl.Name]
					acc.add(r)
					pl.into[impl.Name] = acc
				}
			}
		}
	}
	if len(cfg.RedLockAddrs) > 0 {
		impls := RedLockImpls()
		for i := 0; i < redLockRounds; i++ {
			if i%2 == 1 {
				slices.Reverse(impls)
			}
			for _, impl := range impls {
				if err := step(fmt.Sprintf("RedLock over %d servers, round %d of %d: %s", len(cfg.RedLockAddrs), i+1, redLockRounds, impl.Name)); err != nil {
					return rep, err
				}
				r, err := RedLockRun(ctx, cfg.RedLockAddrs, impl, max(1, cfg.Uncontended/10/redLockRounds), cfg.Contenders, cfg.Hold, cfg.Duration/redLockRounds)
				if err != nil {
					return fail(fmt.Errorf("%s RedLock: %w", impl.Name, err))
				}
				acc := rep.RedLock[impl.Name]
				acc.Uncont.add(r.Uncont)
				acc.Cont.add(r.Cont)
				rep.RedLock[impl.Name] = acc
			}
		}
	}
	if cfg.Waiters > 0 {
		if err := step(fmt.Sprintf("dsync: %d waiters on one lock", cfg.Waiters)); err != nil {
			return rep, err
		}
		if rep.Waiters, err = ManyWaiters(ctx, cfg.Addr, cfg.Waiters); err != nil {
			return fail(fmt.Errorf("waiters: %w", err))
		}
	}
	if cfg.Held > 0 {
		// A quarter as many: still enough batches to keep every renewal
		// slot busy, so a difference would come from the number held.
		if err := step(fmt.Sprintf("dsync: %d locks held", cfg.Held/4)); err != nil {
			return rep, err
		}
		if rep.HeldSmall, err = ManyHeld(ctx, cfg.Addr, cfg.Held/4, 3*time.Second, 3); err != nil {
			return fail(fmt.Errorf("held: %w", err))
		}
		if err := step(fmt.Sprintf("dsync: %d locks held", cfg.Held)); err != nil {
			return rep, err
		}
		if rep.Held, err = ManyHeld(ctx, cfg.Addr, cfg.Held, 3*time.Second, 3); err != nil {
			return fail(fmt.Errorf("held: %w", err))
		}
	}
	return rep, nil
}

func us(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return d.Round(100 * time.Millisecond).String()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// Write prints the comparison table, the dsync-only results and the
// targets of DESIGN.md §7 with whether this run met them.
func (r *Report) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "dsync bench: %s; %d CPUs, %s %s/%s\n", r.Server, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if c.ShapeOnly {
		fmt.Fprintf(w, "round trip (PING): %s in a busy loop\n", us(r.RoundTrip))
		r.writeShape(w)
		r.writeTargets(w)
		return
	}
	fmt.Fprintf(w, "round trip (PING): %s in a busy loop, %s from idle; PUBLISH to an idle subscriber: %s, plus its round trip: %s\n",
		us(r.RoundTrip), us(r.Floor.ColdRoundTrip), us(r.Floor.Delivery), us(r.Floor.DeliveryRoundTrip))
	where := "each with its own client, all in this process"
	if c.Spawn != nil {
		where = "each in a process of its own"
	}
	r.writeUncontended(w)
	r.writeShape(w)
	fmt.Fprintf(w, "contended: %d contenders, %s, %v per implementation in 5 interleaved rounds\n\n", c.Contenders, where, c.Duration)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	writeContended(tw, r.Impls, fmt.Sprintf("%d contenders, no hold", c.Contenders), r.Cont0)
	writeContended(tw, r.Impls, fmt.Sprintf("%d contenders, %v hold", c.Contenders, c.Hold), r.ContHold)
	row := func(label string, f func(name string) string) {
		line := label + "\t"
		for _, impl := range r.Impls {
			line += f(impl.Name) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	section := func(title string) { fmt.Fprintln(tw, title+"\t"+strings.Repeat("\t", len(r.Impls))) }

	section("handoff: release to next holder")
	row("  median", func(n string) string { return us(percentile(r.Handoff[n].Waits, 0.5)) })
	row("  p99", func(n string) string { return us(percentile(r.Handoff[n].Waits, 0.99)) })
	row("  idle round trip", func(n string) string { return us(percentile(r.Handoff[n].IdlePings, 0.5)) })
	row("  median/idle round trip", func(n string) string {
		h := r.Handoff[n]
		return fmt.Sprintf("%.1f", float64(percentile(h.Waits, 0.5))/float64(percentile(h.IdlePings, 0.5)))
	})
	row("  give-ups", func(n string) string { return fmt.Sprint(r.Handoff[n].GiveUps) })
	tw.Flush()

	fmt.Fprintln(w)
	for _, impl := range r.Impls {
		fmt.Fprintf(w, "  %-14s %s\n", impl.Name, impl.Note)
	}
	fmt.Fprintln(w, "  hand-offs/acq: the share of acquisitions that a release handed over (observe's HandedOff, counted by the releasing client;")
	fmt.Fprintln(w, "  observe does not report a hand-off that a newcomer's attempt makes to a head waiter past the threshold, which is not counted)")
	fmt.Fprintln(w)
	if len(r.GoCont0) > 0 {
		fmt.Fprintf(w, "contended, goroutines: %d contenders as goroutines of this process sharing one client (a pool; for dsync one backend on it), %v per implementation in 5 interleaved rounds\n\n", c.Contenders, c.Duration)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		writeContended(tw, GoroutineImpls(), fmt.Sprintf("%d goroutines, no hold", c.Contenders), r.GoCont0)
		writeContended(tw, GoroutineImpls(), fmt.Sprintf("%d goroutines, %v hold", c.Contenders, c.Hold), r.GoContHold)
		tw.Flush()
		fmt.Fprintln(w)
	}
	if len(r.RW) > 0 {
		fmt.Fprintf(w, "read-write workload: %d contenders (%s), %v hold, %.0f%% of the rwlock's cycles reading\n", c.Contenders, where, c.Hold, 100*ReadShare)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tacquisitions/s\twait p50\twait p99\tclient cmds/acq\t")
		for _, impl := range RWImpls() {
			m := r.RW[impl.Name]
			if m.Acquisitions == 0 {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%.0f\t%s\t%s\t%.1f\t\n", impl.Name, m.Rate(), us(percentile(m.Waits, 0.5)), us(percentile(m.Waits, 0.99)), m.PerAcq(m.Commands))
		}
		tw.Flush()
		for _, impl := range RWImpls() {
			fmt.Fprintf(w, "  %-14s %s\n", impl.Name, impl.Note)
		}
		fmt.Fprintln(w)
	}
	if r.Ring > 0 {
		meaning := "the most that handing a lock over between processes reaches here"
		if c.Spawn == nil {
			meaning = "for reference: dsync hands over within this process without the server"
		}
		fmt.Fprintf(w, "hand-off ring, no lock: %d members, %s, pass a token by PUBLISH after holding it %v: %.0f hand-offs/s,\n"+
			"  %s; dsync got %.2fx of it, redsync %.2fx\n\n",
			c.Contenders, where, c.Hold, r.Ring, meaning, r.ContHold["dsync"].Rate()/r.Ring, r.ContHold["redsync"].Rate()/r.Ring)
	}
	if wr := r.Waiters; wr.Waiters > 0 {
		fmt.Fprintf(w, "dsync, %d waiters on one lock in one process: %d pub/sub connection(s) while waiting; %d acquired in %v (%.0f/s), %.1f client cmds and %.1f server calls per acquisition\n",
			wr.Waiters, wr.PubSubConns, wr.Acquired, wr.Elapsed.Round(time.Millisecond), float64(wr.Acquired)/wr.Elapsed.Seconds(),
			float64(wr.Commands)/float64(max(1, wr.Acquired)), float64(wr.ServerCalls)/float64(max(1, wr.Acquired)))
	}
	for _, h := range []HeldResult{r.HeldSmall, r.Held} {
		if h.Held > 0 {
			fmt.Fprintf(w, "dsync, %d locks held (%v watchdog lease): goroutines %d idle, at most %d while holding and renewing; %.1f renewal calls per %v interval; %d lost\n",
				h.Held, 3*h.Interval, h.GoroutinesIdle, h.GoroutinesHeld, h.RenewalsPerInterval, h.Interval, h.Lost)
		}
	}
	r.writeAdapters(w)
	r.writeSemaphore(w)
	r.writeElection(w)
	r.writeRedLock(w)
	r.writeTargets(w)
}

// writeContended prints the rows of one contended scenario, a column per
// implementation of impls, to tw.
func writeContended(tw *tabwriter.Writer, impls []Impl, title string, m map[string]Result) {
	row := func(label string, f func(name string) string) {
		line := label + "\t"
		for _, impl := range impls {
			line += f(impl.Name) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	vs := func(label string, get func(name string) float64) {
		d := get("dsync")
		row(label, func(name string) string {
			if name == "dsync" {
				return ""
			}
			return ratio(d, get(name))
		})
	}
	head := "\t"
	for _, impl := range impls {
		head += impl.Name + "\t"
	}
	fmt.Fprintln(tw, head)
	fmt.Fprintln(tw, title+"\t"+strings.Repeat("\t", len(impls)))
	row("  acquisitions/s", func(n string) string { return fmt.Sprintf("%.0f", m[n].Rate()) })
	row("  wait p50", func(n string) string { return us(percentile(m[n].Waits, 0.5)) })
	row("  wait p99", func(n string) string { return us(percentile(m[n].Waits, 0.99)) })
	row("  wait max", func(n string) string { return us(percentile(m[n].Waits, 1)) })
	row("  client cmds/acq", func(n string) string { return fmt.Sprintf("%.1f", m[n].PerAcq(m[n].Commands)) })
	row("  server calls/acq", func(n string) string { return fmt.Sprintf("%.1f", m[n].PerAcq(m[n].ServerCalls)) })
	row("  hand-offs/acq", func(n string) string {
		if !strings.HasPrefix(n, "dsync") {
			return "-" // a peer's releases hand nothing over
		}
		return fmt.Sprintf("%.2f", m[n].PerAcq(m[n].HandOffs))
	})
	row("  give-ups", func(n string) string { return fmt.Sprint(m[n].GiveUps) })
	row("  pub/sub conns", func(n string) string { return fmt.Sprint(m[n].PubSubConns) })
	row("  goroutines", func(n string) string { return fmt.Sprint(m[n].Goroutines) })
	vs("  dsync/peer acq/s", func(n string) float64 { return m[n].Rate() })
	vs("  dsync/peer p99", func(n string) float64 { return float64(percentile(m[n].Waits, 0.99)) })
	vs("  dsync/peer max", func(n string) float64 { return float64(percentile(m[n].Waits, 1)) })
}

// writeSemaphore prints the semaphore scenario, if it ran: with the
// contenders placed as the contended rows', and as goroutines beside
// them if they were processes.
func (r *Report) writeSemaphore(w io.Writer) {
	sem, mu := r.Sem[SemImpl.Name], r.Sem["dsync"]
	if sem.Acquisitions == 0 {
		return
	}
	where := "as goroutines"
	if r.Config.Spawn != nil {
		where = "in processes"
	}
	fmt.Fprintf(w, "\nsemaphore: %d contenders, %v hold, dsync's semaphore of capacity %d (%s) and mutex, 5 interleaved rounds\n",
		r.Config.SemContenders, r.Config.Hold, SemaphoreCapacity, SemImpl.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []Result{mu, sem}
	head := "\tdsync, " + where + "\t" + SemImpl.Name + ", " + where + "\t"
	if gs := r.GoSem[SemImpl.Name]; gs.Acquisitions > 0 {
		cols = append(cols, r.GoSem["dsync"], gs)
		head += "dsync, as goroutines\t" + SemImpl.Name + ", as goroutines\t"
	}
	fmt.Fprintln(tw, head)
	row := func(label string, f func(Result) string) {
		line := label + "\t"
		for _, c := range cols {
			line += f(c) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	row("  acquisitions/s", func(x Result) string { return fmt.Sprintf("%.0f", x.Rate()) })
	row("  wait p50", func(x Result) string { return us(percentile(x.Waits, 0.5)) })
	row("  wait p99", func(x Result) string { return us(percentile(x.Waits, 0.99)) })
	row("  wait max", func(x Result) string { return us(percentile(x.Waits, 1)) })
	row("  client cmds/acq", func(x Result) string { return fmt.Sprintf("%.1f", x.PerAcq(x.Commands)) })
	row("  server calls/acq", func(x Result) string { return fmt.Sprintf("%.1f", x.PerAcq(x.ServerCalls)) })
	row("  give-ups", func(x Result) string { return fmt.Sprint(x.GiveUps) })
	tw.Flush()
}

// contendedTargets checks the contended targets of the mutex (DESIGN.md
// §7) against redsync's, with the contenders placed as how says, and
// prints what the waiting-time model (see RequiredRate) makes of the
// targets without a critical section. procs says the contenders were
// processes, for which the hand-off ring is the ceiling.
func (r *Report) contendedTargets(w io.Writer, check func(ok bool, format string, args ...any), how string, cont0, contHold map[string]Result, procs bool) {
	n, hold := r.Config.Contenders, r.Config.Hold
	info := func(format string, args ...any) { fmt.Fprintf(w, "  info   %s\n", fmt.Sprintf(format, args...)) }
	if d, p := cont0["dsync"], cont0["redsync"]; d.Acquisitions > 0 && p.Acquisitions > 0 {
		dp, pp := percentile(d.Waits, 0.99), percentile(p.Waits, 0.99)
		dm, pm := percentile(d.Waits, 1), percentile(p.Waits, 1)
		check(d.Rate() >= p.Rate(), "%d contenders %s, no hold: throughput %.0f/s = %.2fx redsync's (target >= 1.0x)", n, how, d.Rate(), d.Rate()/max(1, p.Rate()))
		check(pp > 0 && dp <= 2*pp, "%d contenders %s, no hold: p99 wait %s vs redsync's %s (target <= 2x)", n, how, us(dp), us(pp))
		check(pm > 0 && 20*dm <= pm, "%d contenders %s, no hold: max wait %s vs redsync's %s (target <= 1/20)", n, how, us(dm), us(pm))
		// The three targets together: the p99 and max bounds cap the
		// mean wait, which fixes the least rate (see waitmodel.go).
		need := RequiredRate(n, 2*pp, pm/20)
		ceiling := SerialCeiling(r.RoundTrip)
		info("%d contenders %s, no hold: a p99 <= %s and a max <= %s need >= %.0f acquisitions/s = %.2fx redsync's rate (mean wait (N-1)/R <= 0.99 p99 + 0.01 max; bench/waitmodel.go)",
			n, how, us(2*pp), us(pm/20), need, need/max(1, p.Rate()))
		info("%d contenders %s, no hold: the machine's ceiling, a release and the next acquisition as 2 round trips of %s (busy loop), is %.0f/s; the targets need %.2fx of it; dsync ran %.0f/s, redsync %.0f/s",
			n, how, us(r.RoundTrip), ceiling, need/max(1, ceiling), d.Rate(), p.Rate())
		if h := cont0["dsync-handoff"]; h.Acquisitions > 0 {
			info("%d contenders %s, no hold: dsync-handoff %.2fx redsync's rate, p99 %s, max %s; hand-offs per acquisition %.2f (dsync %.2f)",
				n, how, h.Rate()/max(1, p.Rate()), us(percentile(h.Waits, 0.99)), us(percentile(h.Waits, 1)), h.PerAcq(h.HandOffs), d.PerAcq(d.HandOffs))
		}
	}
	d, p := contHold["dsync"], contHold["redsync"]
	if d.Acquisitions == 0 || p.Acquisitions == 0 {
		return
	}
	check(d.Rate() >= p.Rate(), "%d contenders %s, %v hold: throughput %.2fx redsync's (target >= 1.0x)", n, how, hold, d.Rate()/max(1, p.Rate()))
	if r.Ring > 0 && procs {
		check(d.Rate() >= 0.85*r.Ring, "%d contenders %s, %v hold: throughput %.2fx the hand-off ring's ceiling (target >= 0.85x)", n, how, hold, d.Rate()/r.Ring)
	}
	dp, pp := percentile(d.Waits, 0.99), percentile(p.Waits, 0.99)
	check(pp > 0 && dp*20 <= pp, "%d contenders %s, %v hold: p99 wait %s vs redsync's %s (target <= 1/20)", n, how, hold, us(dp), us(pp))
	check(d.PerAcq(d.Commands) <= 5, "%d contenders %s, %v hold: %.1f client commands per acquisition (target <= 5; %.1f server calls with script internals)",
		n, how, hold, d.PerAcq(d.Commands), d.PerAcq(d.ServerCalls))
	if h := contHold["dsync-handoff"]; h.Acquisitions > 0 {
		info("%d contenders %s, %v hold: dsync-handoff %.2fx redsync's rate, p99 %s; hand-offs per acquisition %.2f (dsync %.2f)",
			n, how, hold, h.Rate()/max(1, p.Rate()), us(percentile(h.Waits, 0.99)), h.PerAcq(h.HandOffs), d.PerAcq(d.HandOffs))
		// The rate and p99 targets together: waiters are served only by
		// hand-offs, which cost more than redsync's relocks (see
		// HoldRateCeiling).
		period := func(rate float64) time.Duration { return time.Duration(float64(time.Second) / max(1, rate)) }
		relock, handoff := period(p.Rate()), period(h.Rate())
		line := fmt.Sprintf("%d contenders %s, %v hold: with dsync-handoff's hand-off (%s a cycle) and redsync's relock (%s), waits within %s allow at most %.2fx redsync's rate",
			n, how, hold, us(handoff), us(relock), us(pp/20), HoldRateCeiling(n, relock, handoff, pp/20))
		if r.Ring > 0 && procs {
			line += fmt.Sprintf("; with the hand-off ring's (%s), %.2fx", us(period(r.Ring)), HoldRateCeiling(n, relock, period(r.Ring), pp/20))
		}
		info("%s (bench/waitmodel.go)", line)
	}
}

// semIdeal is the FIFO ideal wait of the semaphore scenario: every
// contender, queued again right after its release, waits for the
// contenders ahead of it beyond the capacity, each a cycle of this run's
// own rate.
func (r *Report) semIdeal(sem Result) time.Duration {
	return time.Duration(float64(r.Config.SemContenders-SemaphoreCapacity) * float64(time.Second) / max(1, sem.Rate()))
}

// ofIdeal says how a wait compares to its FIFO ideal, x times it: one
// in a round that acquired nothing (see Result.WaitCycles) to none.
func ofIdeal(x float64) string {
	if math.IsInf(x, 1) {
		return "past any multiple of the FIFO ideal (a round acquired nothing)"
	}
	return fmt.Sprintf("%.2fx the FIFO ideal", x)
}

func (r *Report) writeTargets(w io.Writer) {
	fmt.Fprintln(w, "\ntargets (DESIGN.md §7):")
	check := func(ok bool, format string, args ...any) {
		mark := "met   "
		if !ok {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "  %s %s\n", mark, fmt.Sprintf(format, args...))
	}
	info := func(format string, args ...any) { fmt.Fprintf(w, "  info   %s\n", fmt.Sprintf(format, args...)) }
	r.shapeTargets(w, check)
	if r.Config.ShapeOnly {
		return
	}
	r.uncontendedTargets(check)
	how := "as goroutines"
	if r.Config.Spawn != nil {
		how = "in processes"
	}
	r.contendedTargets(w, check, how, r.Cont0, r.ContHold, r.Config.Spawn != nil)
	if len(r.GoCont0) > 0 {
		r.contendedTargets(w, check, "as goroutines sharing a client", r.GoCont0, r.GoContHold, false)
	}
	d := r.ContHold["dsync"]
	// A handoff starts from idle: the holder held for 20ms, the waiter was
	// parked. Its unit is a round trip from idle too, a PING timed in the
	// same rounds after the same idle time; waking from idle costs more
	// than the network, so a busy-loop round trip (printed too) is not
	// one any handoff could be counted in.
	hd := r.Handoff["dsync"]
	h, idle := percentile(hd.Waits, 0.5), percentile(hd.IdlePings, 0.5)
	check(idle > 0 && float64(h) <= 2*float64(idle), "handoff median %s = %.1f round trips of %s from idle, measured in the same rounds (target <= 2; %.1f of %s in a busy loop)",
		us(h), float64(h)/float64(max(1, idle)), us(idle), float64(h)/float64(r.RoundTrip), us(r.RoundTrip))
	if f, ok := r.ContHold["dsync-fair"]; ok && f.Acquisitions > 0 {
		// Under strict FIFO every contender, queued again right after its
		// release, waits for the other contenders' holds and hand-offs:
		// contenders-1 cycles. A wait is counted in cycles of its own
		// round (see Result.WaitCycles): rounds minutes apart run at the
		// machine's speed of the moment, and the ideal of a slow round is
		// longer. A round that nearly stalled has a long cycle too, and
		// its waits hide behind it here: the throughput line below, and
		// the waits pooled over every round against the whole run's mean
		// cycle, printed beside them, show it. With one contender nobody
		// queues: there is no ideal to set the waits against.
		if n := float64(r.Config.Contenders - 1); n > 0 {
			cycle := time.Duration(float64(time.Second) / f.Rate())
			ideal := time.Duration(n * float64(cycle))
			fp, fm := percentile(f.WaitCycles, 0.99)/n, percentile(f.WaitCycles, 1)/n
			check(fp <= 1.3, "fairlock, %d contenders, %v hold: p99 wait %s, %d cycles of its round (target <= 1.3x)",
				r.Config.Contenders, r.Config.Hold, ofIdeal(fp), r.Config.Contenders-1)
			check(fm <= 2, "fairlock, %d contenders, %v hold: max wait %s (target <= 2x)",
				r.Config.Contenders, r.Config.Hold, ofIdeal(fm))
			pp, pm := percentile(f.Waits, 0.99), percentile(f.Waits, 1)
			info("fairlock, %d contenders, %v hold: pooled over the rounds, p99 wait %s and max %s = %.2fx and %.2fx the FIFO ideal %s (%d cycles of the run's mean %s)",
				r.Config.Contenders, r.Config.Hold, us(pp), us(pm), float64(pp)/float64(ideal), float64(pm)/float64(ideal), us(ideal), r.Config.Contenders-1, us(cycle))
		}
		check(f.Rate() >= 0.95*d.Rate(), "fairlock, %d contenders, %v hold: throughput %.2fx the dsync mutex's (target >= 0.95x)",
			r.Config.Contenders, r.Config.Hold, f.Rate()/max(1, d.Rate()))
	}
	if rw, mu, ro := r.RW["dsync-rw"], r.RW["dsync"], r.RW["dsync-rlock"]; rw.Acquisitions > 0 {
		// The model's ceiling for this machine, calibrated on the mutex's
		// and the readers' rates on the same workload. In one process the
		// mutex hands over without the server, which the model would take
		// for a faster machine: there the ratio is only printed.
		m := RWCeiling(RWModelInput{Contenders: r.Config.Contenders, Hold: r.Config.Hold,
			ReadShare: ReadShare, MutexRate: mu.Rate(), ReadRate: ro.Rate()})
		msg := fmt.Sprintf("rwlock, %d contenders, %v hold, %.0f%% reads: throughput %.0f/s = %.2fx the queueing model's ceiling %.0f/s (target >= 0.9x; %.2fx the dsync mutex's)",
			r.Config.Contenders, r.Config.Hold, 100*ReadShare, rw.Rate(), rw.Rate()/max(1, m.Rate), m.Rate, rw.Rate()/max(1, mu.Rate()))
		if r.Config.Spawn != nil {
			check(rw.Rate() >= 0.9*m.Rate, "%s", msg)
		} else {
			fmt.Fprintf(w, "  info   %s\n", msg)
		}
	}
	if sem, mu := r.Sem[SemImpl.Name], r.Sem["dsync"]; sem.Acquisitions > 0 {
		check(sem.Rate() >= 3*mu.Rate(), "semaphore, capacity %d, %d contenders %s, %v hold: throughput %.2fx the dsync mutex's (target >= 3x)",
			SemaphoreCapacity, r.Config.SemContenders, how, r.Config.Hold, sem.Rate()/max(1, mu.Rate()))
		// The p99 target is set with the contenders as goroutines; in
		// processes the figure is reported beside it. With no more
		// contenders than permits nobody waits in the ideal: there is no
		// ratio to it.
		// Each wait counts in cycles of its own round, as fairlock's do.
		p99 := func(x Result, how string) (string, bool) {
			ahead := float64(r.Config.SemContenders - SemaphoreCapacity)
			if ahead <= 0 || x.Acquisitions == 0 {
				return "", false
			}
			ratio := percentile(x.WaitCycles, 0.99) / ahead
			pooled := percentile(x.Waits, 0.99)
			return fmt.Sprintf("semaphore, capacity %d, %d contenders %s, %v hold: p99 wait %s, %.0f cycles of its round (target <= 1.5x as goroutines; pooled over the rounds %s = %.2fx %s)",
				SemaphoreCapacity, r.Config.SemContenders, how, r.Config.Hold, ofIdeal(ratio), ahead, us(pooled), float64(pooled)/float64(max(1, r.semIdeal(x))), us(r.semIdeal(x))), ratio <= 1.5
		}
		// Without a goroutine placement (-goroutines=false), the target
		// is checked on the processes' figure, the only one there is.
		gs := r.GoSem[SemImpl.Name]
		if r.Config.Spawn == nil || gs.Acquisitions == 0 {
			if msg, ok := p99(sem, how); msg != "" {
				check(ok, "%s", msg)
			}
		} else {
			if msg, ok := p99(gs, "as goroutines"); msg != "" {
				check(ok, "%s", msg)
			}
			if msg, _ := p99(sem, how); msg != "" {
				fmt.Fprintf(w, "  info   %s\n", msg)
			}
		}
	}
	if d, rs := r.RedLock["dsync-redlock"], r.RedLock["redsync-redlock"]; d.Uncont.Acquisitions > 0 && rs.Uncont.Acquisitions > 0 {
		n := len(r.Config.RedLockAddrs)
		per := func(x Result) float64 { return float64(x.Elapsed) / float64(max(1, x.Acquisitions)) }
		check(per(d.Uncont) <= 1.1*per(rs.Uncont), "RedLock over %d servers, uncontended: time %.2fx redsync's (target <= 1.1x)", n, per(d.Uncont)/per(rs.Uncont))
		dp, rp := percentile(d.Cont.Waits, 0.99), percentile(rs.Cont.Waits, 0.99)
		check(4*dp <= rp, "RedLock over %d servers, %d contenders, %v hold: p99 wait %s vs redsync's %s (target <= 1/4)", n, r.Config.Contenders, r.Config.Hold, us(dp), us(rp))
		check(d.Cont.Rate() >= 0.85*rs.Cont.Rate(), "RedLock over %d servers, %d contenders, %v hold: throughput %.2fx redsync's (target >= 0.85x)", n, r.Config.Contenders, r.Config.Hold, d.Cont.Rate()/max(1, rs.Cont.Rate()))
		if h := r.RedLock["dsync-redlock-handoff"]; h.Cont.Acquisitions > 0 {
			fmt.Fprintf(w, "  info   RedLock over %d servers, %d contenders, %v hold: dsync-redlock-handoff %.2fx redsync's rate, p99 %s\n",
				n, r.Config.Contenders, r.Config.Hold, h.Cont.Rate()/max(1, rs.Cont.Rate()), us(percentile(h.Cont.Waits, 0.99)))
		}
	}
	r.electionTargets(check)
	if wr := r.Waiters; wr.Waiters > 0 {
		check(wr.PubSubConns <= 2 && wr.Acquired == int64(wr.Waiters), "%d waiters: %d pub/sub connection(s), %d acquired (target <= 2, all)", wr.Waiters, wr.PubSubConns, wr.Acquired)
	}
	if hl, hs := r.Held, r.HeldSmall; hl.Held > 0 {
		// The most the design allows whatever the number held: the
		// timer's callback, the goroutine handing out the batches, per
		// renewal in flight one of ours and one of the redigo adapter's (a
		// call with a cancellable context waits for its reply in one), and
		// the session's pub/sub connection that watches for a restart
		// while anything is held (the hub's goroutine and the adapter's
		// reader). The sampled maximum nears it as the batches per
		// interval grow.
		bound := 2 + 2*lease.MaxRenewing + 2
		dg, sg := hl.GoroutinesHeld-hl.GoroutinesIdle, hs.GoroutinesHeld-hs.GoroutinesIdle
		// A negative count says the baseline was taken while goroutines
		// of an earlier scenario were still ending: not a measurement.
		check(dg <= bound && sg <= bound && dg >= 0 && sg >= 0, "%d held: at most %d extra goroutines, %d with %d held (target: independent of the number held; the design's bound is %d)", hl.Held, dg, sg, hs.Held, bound)
		check(hl.RenewalsPerInterval <= float64(hl.Held)/50, "%d held: %.1f renewal calls per interval (target <= %d)", hl.Held, hl.RenewalsPerInterval, hl.Held/50)
	}
}
