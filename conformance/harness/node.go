// Package harness starts private redis-server processes for tests — a
// standalone server, a Redis Cluster, a primary with a replica watched by
// Sentinel — and injects faults into them: restart (not behind Sentinel),
// flush, kill. It is
// independent of any client library, so that an adapter's test file needs
// only its own client:
//
//	func TestConformance(t *testing.T) {
//		srv := harness.Standalone(t)
//		conformance.Run(t, func(t *testing.T) backend.Backend {
//			c := myclient.New(srv.Addr())
//			b := myadapter.New(c)
//			t.Cleanup(func() { b.Close(); c.Close() })
//			return b
//		}, conformance.WithHooks(srv.Hooks()))
//	}
//
// Servers listen on free loopback ports, keep their files in a temporary
// directory, persist nothing, and die with the test binary on Linux. The
// helpers that take a testing.TB skip the test when redis-server is not on
// PATH, or fail it when the environment sets DSYNC_REQUIRE_REDIS=1. The
// Start functions return errors instead, for servers shared by a package's
// tests (start in TestMain, Close after m.Run).
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// RequireRedis reports whether a missing redis-server fails tests instead of
// skipping them ($DSYNC_REQUIRE_REDIS=1).
func RequireRedis() bool { return os.Getenv("DSYNC_REQUIRE_REDIS") == "1" }

// Available reports whether redis-server is on PATH.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// skipUnavailable skips t, or fails it under DSYNC_REQUIRE_REDIS=1, when
// there is no redis-server.
func skipUnavailable(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	if RequireRedis() {
		t.Fatal("harness: redis-server is not on PATH and DSYNC_REQUIRE_REDIS=1")
	}
	t.Skip("harness: redis-server is not on PATH; set DSYNC_REQUIRE_REDIS=1 to fail instead")
}

// startTimeout bounds how long a server may take to answer after start.
const startTimeout = 10 * time.Second

// Node is one redis-server process (a data node or a sentinel). Its
// address stays the same across Kill, Start and Restart.
type Node struct {
	path string   // redis-server
	args []string // role-specific arguments
	conf string   // a config file to pass first (sentinels need one)
	port string
	dir  string

	sentinel bool
	dials    atomic.Int64 // connections Do opened, which the server counts

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while down
	exited chan struct{} // closed when cmd has exited
}

// startNode starts a redis-server on a free port with the given extra
// arguments; extra may contain "{port}" and "{busport}", replaced by the
// node's ports. A port taken by someone else between our probe and the
// server's bind is retried on another.
func startNode(ctx context.Context, sentinel bool, conf string, extra ...string) (*Node, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("harness: redis-server not on PATH: %w", err)
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		dir, err := os.MkdirTemp("", "dsync-redis-")
		if err != nil {
			return nil, err
		}
		ports, err := freePorts(2)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		n := &Node{path: path, port: ports[0], dir: dir, sentinel: sentinel}
		for _, a := range extra {
			a = strings.ReplaceAll(a, "{port}", ports[0])
			a = strings.ReplaceAll(a, "{busport}", ports[1])
			n.args = append(n.args, a)
		}
		if conf != "" {
			n.conf = filepath.Join(dir, "node.conf")
			if err := os.WriteFile(n.conf, []byte(strings.ReplaceAll(conf, "{port}", ports[0])), 0o600); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		if last = n.Start(ctx); last == nil {
			return n, nil
		}
		os.RemoveAll(dir)
	}
	return nil, last
}

func freePorts(n int) ([]string, error) {
	var ports []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		// A cluster node's bus listens on port+10000 unless told
		// otherwise; keep ports where that cannot overflow.
		if p, _ := strconv.Atoi(port); p > 55000 {
			continue
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// Addr returns the node's host:port.
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", n.port) }

// Port returns the node's port.
func (n *Node) Port() string { return n.port }

// Up reports whether the process is running (it was not killed).
func (n *Node) Up() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Start starts the node's process if it is down, on the same port and
// directory, and waits until it answers PING.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	var args []string
	if n.conf != "" {
		args = append(args, n.conf)
	}
	args = append(args, "--port", n.port, "--bind", "127.0.0.1", "--dir", n.dir,
		"--logfile", filepath.Join(n.dir, "redis.log"))
	if !n.sentinel {
		args = append(args,
			"--save", "",
			"--appendonly", "no",
			"--enable-debug-command", "local",
			"--maxclients", "20000",
		)
	}
	args = append(args, n.args...)
	cmd := exec.Command(n.path, args...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("harness: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go waitExit(cmd, exited)
	n.cmd, n.exited = cmd, exited
	deadline := time.Now().Add(startTimeout)
	for i := 0; ; i++ {
		_, err := n.do(ctx, time.Second, "PING")
		if err == nil {
			err = n.answersAs(ctx, cmd.Process.Pid)
			if err == nil {
				return nil
			}
			if errors.Is(err, errPortTaken) {
				n.killLocked()
				return err
			}
		}
		select {
		case <-exited:
			n.cmd = nil
			return fmt.Errorf("harness: redis-server on port %s exited: %v\n%s", n.port, err, n.log())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			n.killLocked()
			return fmt.Errorf("harness: redis-server on port %s did not answer: %v\n%s", n.port, err, n.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// errPortTaken is the error of a start on a port where another server
// answered.
var errPortTaken = errors.New("another server answers on the port")

// answersAs returns nil if the server answering at the node's address is
// the process pid. A server started on a port that another took between
// the probe and the bind exits, but until it does, a PING reaches the
// other (a server of another test, whose kill would then take this node
// down too): only the process id tells them apart.
func (n *Node) answersAs(ctx context.Context, pid int) error {
	s, err := redis.String(n.do(ctx, time.Second, "INFO", "server"))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if v != strconv.Itoa(pid) {
				return fmt.Errorf("harness: port %s: %w (process %s, not ours, %d)", n.port, errPortTaken, v, pid)
			}
			return nil
		}
	}
	return fmt.Errorf("harness: port %s: INFO server has no process_id", n.port)
}

// waitExit reaps the process and tells of its end. conformance.Run's leak
// check knows it by name: a Restart hook starts one.
func waitExit(cmd *exec.Cmd, exited chan<- struct{}) {
	cmd.Wait()
	close(exited)
}

func (n *Node) log() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Signal sends sig to the node's process: SIGSTOP pauses it, as a process
// descheduled for long would be, and SIGCONT resumes it. It fails if the
// node is down.
func (n *Node) Signal(sig os.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("harness: redis-server on port %s is down", n.port)
	}
	return n.cmd.Process.Signal(sig)
}

// Kill ends the process with SIGKILL, as a crash would, and leaves it
// down. Every connection to it drops. It is idempotent.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.killLocked()
}

func (n *Node) killLocked() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

// Restart kills the node and starts it again on the same address. Its data
// is lost (nothing is persisted); a cluster node keeps its identity and
// slots (nodes.conf).
func (n *Node) Restart(ctx context.Context) error {
	n.Kill()
	return n.Start(ctx)
}

// close stops the node and removes its files.
func (n *Node) close() {
	n.Kill()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dir != "" {
		os.RemoveAll(n.dir)
		n.dir = ""
	}
}

// Do runs one command on a fresh connection to the node and returns
// redigo's raw reply: []byte for strings, int64, []any, nil, or an error
// for an error reply.
func (n *Node) Do(ctx context.Context, cmd string, args ...any) (any, error) {
	return n.do(ctx, 5*time.Second, cmd, args...)
}

func (n *Node) do(ctx context.Context, timeout time.Duration, cmd string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n.dials.Add(1)
	c, err := redis.DialContext(ctx, "tcp", n.Addr())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return redis.DoContext(c, ctx, cmd, args...)
}

// info returns the fields of INFO section as a map.
func (n *Node) info(ctx context.Context, section string) (map[string]string, error) {
	s, err := redis.String(n.Do(ctx, "INFO", section))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// waitFor polls cond every 10ms until it reports true, ctx is done or
// timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: %s: not within %v (last error: %v)", what, timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: %s: %w", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// onEach runs fn on every node concurrently and joins the errors.
func onEach(nodes []*Node, fn func(n *Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stats are a node's counters, from INFO: what a test or benchmark of an
// adapter compares before and after its calls.
type Stats struct {
	// Reads counts the server's read events: one per round trip that
	// arrives in one read, a pipelined batch included.
	Reads int64
	// Commands counts the commands processed, those scripts call
	// included, and the INFO of each Stats.
	Commands int64
	// CPU is the server's CPU time, system and user.
	CPU time.Duration
}

// Stats reads the node's counters.
func (n *Node) Stats(ctx context.Context) (Stats, error) {
	info, err := redis.String(n.Do(ctx, "INFO", "all"))
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "total_reads_processed":
			s.Reads, _ = strconv.ParseInt(v, 10, 64)
		case "total_commands_processed":
			s.Commands, _ = strconv.ParseInt(v, 10, 64)
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			s.CPU += time.Duration(f * float64(time.Second))
		}
	}
	return s, nil
}
