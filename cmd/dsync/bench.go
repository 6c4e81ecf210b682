package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/dsyncgo/dsync/bench"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// benchWorker is the hidden command that runs one contender of bench.
const benchWorker = "bench-worker"

// workerMain runs one contender of bench on standard input and output.
func workerMain(ctx context.Context, e *env) error {
	return bench.Worker(ctx, e.stdin, e.stdout)
}

const benchDoc = `bench runs dsync and its peers (redsync, bsm/redislock, rueidislock) side
by side on one server and prints the comparison and the targets of
DESIGN.md §7: uncontended lock+unlock; the service shape, G goroutines
sharing one client (redigo, go-redis, rueidis), each locking a name of its
own, beside two PINGs per pair (-shape runs that table alone); contended
runs with each contender in a process of its own, and for the mutex (in
both of its modes) and redsync with the contenders as goroutines of one
process sharing one client, and for the semaphore as goroutines each with
a client of its own; the hand-off from a release to a waiter; and
for dsync a semaphore of capacity 4 beside the mutex, an election's
Campaign+Resign and hand-over beside the mutex's, many waiters on one
lock, many locks held at once, and multilock.RedLock against redsync's
RedLock over -redlock-servers private servers of its own. Without -redis
it starts a private redis-server from PATH on a free loopback port.
Progress is shown on standard error when it is a terminal. An interrupt
(Ctrl-C) stops the run and lists the steps it completed.`

// runBench runs dsync and its peers side by side on one server and prints the
// comparison.
func runBench(ctx context.Context, e *env, args []string) error {
	cfg := bench.DefaultConfig()
	fs := newFlagSet(e, "bench", benchDoc)
	// bench's peers and the bench package's clients dial host:port, with
	// no password and no TLS: so is the one server bench takes.
	conn := connFlags{optional: true}
	fs.Var(&conn.redis, "redis", "`host:port` (or redis://host:port) of a Redis server without password or TLS; default: start a private redis-server from PATH on a free loopback port")
	fs.DurationVar(&conn.timeout, "timeout", defaultTimeout, "give up on a -redis server that does not connect or answer a PING within this `duration`")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of each contended scenario per implementation, run in 5 interleaved rounds")
	fs.IntVar(&cfg.Contenders, "contenders", cfg.Contenders, "contending clients")
	fs.DurationVar(&cfg.Hold, "hold", cfg.Hold, "critical section of the second contended scenario")
	fs.IntVar(&cfg.Uncontended, "uncontended", cfg.Uncontended, "uncontended lock+unlock cycles")
	fs.IntVar(&cfg.Adapters, "adapters", cfg.Adapters, "lock+unlock cycles of each kind per shipped adapter (redigo, go-redis, rueidis with and without auto-pipelining; 0 to skip)")
	fs.IntVar(&cfg.Handoffs, "handoffs", cfg.Handoffs, "handoff rounds")
	fs.IntVar(&cfg.Waiters, "waiters", cfg.Waiters, "dsync waiters on one lock (0 to skip)")
	fs.IntVar(&cfg.Held, "held", cfg.Held, "dsync locks held at once (0 to skip)")
	fs.IntVar(&cfg.SemContenders, "sem-contenders", cfg.SemContenders, "contenders for a dsync semaphore of capacity 4 and for the mutex beside it, holding for -hold (0 to skip)")
	redlockServers := fs.Int("redlock-servers", 5, "private redis-servers for the RedLock scenario (0 to skip)")
	inProcess := fs.Bool("inprocess", false, "run the contenders as goroutines of this process instead of a process each")
	fs.BoolVar(&cfg.GoroutineRows, "goroutines", cfg.GoroutineRows, "with contenders in processes, also run the mutex's contended rows (dsync, dsync-handoff, redsync) with the contenders as goroutines of this process sharing one client, and the semaphore scenario with the contenders as goroutines")
	shapeOnly := fs.Bool("shape", false, "run only the service-shape table")
	fs.DurationVar(&cfg.ShapeDuration, "shape-duration", cfg.ShapeDuration, "length of each cell of the service-shape table (a row at one number of goroutines) per round")
	fs.IntVar(&cfg.ShapeRounds, "shape-rounds", cfg.ShapeRounds, "interleaved rounds of the service-shape table (0 to skip it)")
	shapeGs := fs.String("shape-goroutines", joinInts(cfg.ShapeGoroutines), "comma-separated `counts` of goroutines sharing one client in the service-shape table (its targets are at 64)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	if cfg.Contenders < 1 || cfg.Duration <= 0 || cfg.Uncontended < 1 || cfg.Handoffs < 1 {
		return usagef("-contenders, -duration, -uncontended and -handoffs must be positive")
	}
	if cfg.Waiters < 0 || cfg.Held < 0 || cfg.Adapters < 0 || cfg.Hold < 0 || cfg.SemContenders < 0 || *redlockServers < 0 || cfg.ShapeRounds < 0 || conn.timeout <= 0 {
		return usagef("-waiters, -held, -adapters, -hold, -sem-contenders, -redlock-servers and -shape-rounds must not be negative, -timeout must be positive")
	}
	if cfg.ShapeGoroutines, err = parseCounts(*shapeGs); err != nil {
		return usagef("-shape-goroutines: %v", err)
	}
	if cfg.ShapeDuration <= 0 {
		return usagef("-shape-duration must be positive")
	}
	cfg.ShapeOnly = *shapeOnly
	if cfg.ShapeOnly {
		if cfg.ShapeRounds == 0 {
			return usagef("-shape with -shape-rounds 0 measures nothing")
		}
		*redlockServers = 0 // the table needs one server only
	}

	t, err := conn.target()
	switch {
	case err != nil:
		return err
	case t.kind == "":
		srv, err := testserver.StartRedis()
		if err != nil {
			return fmt.Errorf("bench needs a real server: install redis-server or pass -redis host:port (%w)", err)
		}
		defer srv.Stop()
		cfg.Addr = srv.Addr()
	case t.user != "" || t.password != "" || t.tls || t.db != 0:
		return usagef("-redis: bench's clients and peers connect to host:port without a password, TLS or a database number: run it on its own server (the default) or on one without")
	default:
		// Fail fast on a server that does not answer. (The benchmark's
		// own clients are the bench package's.)
		srv, err := openServer(ctx, e, &conn)
		if err != nil {
			return err
		}
		srv.close()
		cfg.Addr = t.addrs[0]
	}
	for range *redlockServers {
		// Always private servers, even with -redis: RedLock needs
		// independent ones.
		srv, err := harness.StartServer(ctx)
		if err != nil {
			return fmt.Errorf("the RedLock scenario needs redis-server on PATH; pass -redlock-servers 0 to skip it (%w)", err)
		}
		defer srv.Close()
		cfg.RedLockAddrs = append(cfg.RedLockAddrs, srv.Addr())
	}
	if !*inProcess {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot start contender processes (%w); try -inprocess", err)
		}
		cfg.Spawn = func() *exec.Cmd {
			// An interrupt reaches the contenders too, even when only
			// this process got it: they stop as it does, and are killed
			// if they do not within a few seconds.
			cmd := exec.CommandContext(ctx, self, benchWorker)
			cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
			cmd.WaitDelay = 5 * time.Second
			cmd.Stderr = e.stderr
			return cmd
		}
	}
	start := time.Now()
	var steps []string // the steps begun, the last one in progress
	tty := stderrIsTerminal(e.stderr)
	cfg.Progress = func(s string) {
		steps = append(steps, s)
		if tty {
			fmt.Fprintf(e.stderr, "\r\033[K[%3ds] %d: %s", int(time.Since(start).Seconds()), len(steps), s)
		}
	}
	rep, err := bench.Run(ctx, cfg)
	if tty {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	if err != nil && ctx.Err() != nil {
		benchInterrupted(e, rep, steps, time.Since(start))
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	rep.Write(e.stdout)
	fmt.Fprintf(e.stdout, "\nrun took %v\n", time.Since(start).Round(time.Second))
	return nil
}

// benchInterrupted reports what an interrupted run got done: the steps,
// then what they measured.
func benchInterrupted(e *env, rep *bench.Report, steps []string, took time.Duration) {
	fmt.Fprintf(e.stdout, "bench interrupted after %v\n", took.Round(time.Second))
	if len(steps) == 0 {
		fmt.Fprintln(e.stdout, "no step had begun")
		return
	}
	n := len(steps) - 1
	fmt.Fprintf(e.stdout, "%d steps completed\n", n)
	if n > 0 {
		fmt.Fprintf(e.stdout, "last completed: %s\n", steps[n-1])
	}
	fmt.Fprintf(e.stdout, "interrupted during: %s\n", steps[n])
	if rep != nil {
		fmt.Fprint(e.stdout, "\nwhat the completed steps measured (empty cells were not reached):\n\n")
		rep.Write(e.stdout)
	}
}

// parseCounts parses a comma-separated list of positive counts.
func parseCounts(s string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// joinInts prints counts as parseCounts reads them.
func joinInts(ns []int) string {
	fs := make([]string, len(ns))
	for i, n := range ns {
		fs[i] = strconv.Itoa(n)
	}
	return strings.Join(fs, ",")
}
