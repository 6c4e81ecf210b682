// Package waitgroup_test holds the acceptance tests of package waitgroup
// (issue 36): workers in processes of their own, one of them killed, and
// the group's keys deleted under its waiters. They run on a real
// redis-server.
package waitgroup_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/tests/fake"
	"github.com/dsyncgo/dsync/waitgroup"
)

func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	testserver.Main(m, fake.StopShared)
}

// childEnv carries a worker process's arguments: the server's address,
// the key prefix and the watchdog lease.
const childEnv = "DSYNC_WAITGROUP_CHILD"

// runChild runs the worker's part if this process is one, and reports
// whether it was. A worker adds a unit to the group "g" and says "added
// <owner id>"; on "done <ms>" from stdin it works (sleeps) that long, says
// "calling <ns>", counts its unit down and says "done <ns> <error>", with
// the times of its call and its return (Unix ns). It exits when stdin
// ends.
func runChild() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	var addr, p, leaseS string
	fmt.Sscan(spec, &addr, &p, &leaseS)
	lease, _ := time.ParseDuration(leaseS)
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
	b := bredigo.New(pool)
	g := waitgroup.New(b, "g", waitgroup.WithPrefix(p), waitgroup.WithWatchdog(lease), waitgroup.WithLogger(nil))
	ctx := context.Background()
	if err := g.Add(ctx, 1); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("added", g.Owner())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var ms int
		if _, err := fmt.Sscanf(in.Text(), "done %d", &ms); err != nil {
			continue
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		fmt.Println("calling", time.Now().UnixNano())
		err := g.Done(ctx)
		fmt.Println("done", time.Now().UnixNano(), err)
	}
	b.Close()
	pool.Close()
	return true
}

// worker is a worker process.
type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	owner string
}

// startWorkers starts n workers on the group "g" under prefix p and
// returns them once each has added its unit; they are killed when t ends.
func startWorkers(t *testing.T, addr, p string, lease time.Duration, n int) []*worker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var ws []*worker
	for range n {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %v", childEnv, addr, p, lease))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w := &worker{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
		go func() {
			defer close(w.lines)
			s := bufio.NewScanner(stdout)
			for s.Scan() {
				w.lines <- s.Text()
			}
		}()
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		ws = append(ws, w)
	}
	for _, w := range ws {
		w.owner = w.expect(t, "added", 10*time.Second)
	}
	return ws
}

// expect returns the rest of the worker's next line, which must start
// with prefix, waiting at most d.
func (w *worker) expect(t *testing.T, prefix string, d time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-w.lines:
		if !ok || !strings.HasPrefix(line, prefix+" ") {
			t.Fatalf("worker said %q (open %v); want %q", line, ok, prefix)
		}
		return strings.TrimPrefix(line, prefix+" ")
	case <-time.After(d):
		t.Fatalf("worker said nothing for %v; want %q", d, prefix)
	}
	return ""
}

// roundTrip measures the round trip of a script call to the server at
// addr: the 90th percentile of 100 calls, through a backend as the
// waiters use.
func roundTrip(t *testing.T, b backend.Backend) time.Duration {
	t.Helper()
	s := backend.NewScript("return 1")
	var ds []time.Duration
	for range 100 {
		start := time.Now()
		if _, err := b.Eval(context.Background(), s, []string{"rtt"}); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[89]
}

type result struct {
	err error
	at  time.Time
}

// waiters starts n Waits, each through a backend of its own, as n
// processes, and returns once all are registered on the server.
func waiters(t *testing.T, ctx context.Context, srv *testserver.Server, p string, n int, opts ...waitgroup.Option) []chan result {
	t.Helper()
	var rs []chan result
	for range n {
		c := make(chan result, 1)
		g := waitgroup.New(srv.NewBackend(t), "g", append([]waitgroup.Option{waitgroup.WithPrefix(p), waitgroup.WithLogger(nil)}, opts...)...)
		go func() {
			err := g.Wait(ctx)
			c <- result{err, time.Now()}
		}()
		rs = append(rs, c)
	}
	probe := waitgroup.New(srv.NewBackend(t), "g", waitgroup.WithPrefix(p))
	for i := 0; ; i++ {
		st, err := probe.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == n {
			return rs
		}
		if i == 10000 {
			t.Fatalf("%d waiters not registered within 10s (%+v)", n, st)
		}
		time.Sleep(time.Millisecond)
	}
}

func prefix() string { return "wgacc:" + dsync.NewID()[:10] }
