package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/dsyncgo/dsync/bench"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// benchWorker is the hidden command that runs one contender of bench.
const benchWorker = "bench-worker"

// runBench runs dsync and its peers side by side on one server and prints the
// comparison.
func runBench(args []string) error {
	cfg := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	addr := fs.String("redis", "", "address of a Redis server; default: start a private redis-server from PATH on a free loopback port")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of each contended scenario per implementation, run in 5 interleaved rounds")
	fs.IntVar(&cfg.Contenders, "contenders", cfg.Contenders, "contending clients")
	fs.DurationVar(&cfg.Hold, "hold", cfg.Hold, "critical section of the second contended scenario")
	fs.IntVar(&cfg.Uncontended, "uncontended", cfg.Uncontended, "uncontended lock+unlock cycles")
	fs.IntVar(&cfg.Handoffs, "handoffs", cfg.Handoffs, "handoff rounds")
	fs.IntVar(&cfg.Waiters, "waiters", cfg.Waiters, "dsync waiters on one lock (0 to skip)")
	fs.IntVar(&cfg.Held, "held", cfg.Held, "dsync locks held at once (0 to skip)")
	inProcess := fs.Bool("inprocess", false, "run the contenders as goroutines of this process instead of a process each")
	fs.Parse(args)
	if cfg.Contenders < 1 || cfg.Duration <= 0 || cfg.Uncontended < 1 || cfg.Handoffs < 1 {
		return fmt.Errorf("bench: -contenders, -duration, -uncontended and -handoffs must be positive")
	}

	if *addr == "" {
		srv, err := testserver.StartRedis()
		if err != nil {
			return fmt.Errorf("bench needs a real server: install redis-server or pass -redis host:port (%w)", err)
		}
		defer srv.Stop()
		*addr = srv.Addr()
	}
	cfg.Addr = *addr
	if !*inProcess {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: cannot start contender processes (%w); try -inprocess", err)
		}
		cfg.Spawn = func() *exec.Cmd {
			cmd := exec.Command(self, benchWorker)
			cmd.Stderr = os.Stderr
			return cmd
		}
	}
	start := time.Now()
	step := 0
	cfg.Progress = func(s string) {
		step++
		fmt.Fprintf(os.Stderr, "\r\033[K[%3ds] %d: %s", int(time.Since(start).Seconds()), step, s)
	}
	rep, err := bench.Run(context.Background(), cfg)
	fmt.Fprint(os.Stderr, "\r\033[K")
	if err != nil {
		return err
	}
	rep.Write(out)
	fmt.Fprintf(out, "\nrun took %v\n", time.Since(start).Round(time.Second))
	return nil
}
