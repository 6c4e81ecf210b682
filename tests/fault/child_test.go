package fault

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/mutex"
)

// Client processes: the test binary run again with childEnv set plays a
// client of the lock server in a process of its own, which the test kills
// or pauses. It takes commands on stdin and reports on stdout, a line each.
const childEnv = "DSYNC_FAULT_CHILD"

// runChild runs the child's part if this process is one, and reports
// whether it was.
func runChild() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	f := strings.Fields(spec)
	var err error
	switch f[0] {
	case "holder":
		err = childHolder(f[1:])
	case "soak":
		err = soakClient(f[1:])
	case "greedy":
		err = childGreedy(f[1:])
	default:
		err = fmt.Errorf("unknown child role %q", f[0])
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	return true
}

// childHolder: args addr, name, lease, "watchdog" or "fixed". It locks
// the mutex and prints "locked <token>", then prints "lost" when Done
// closes, and obeys "unlock" and "write <register addr> <value>" (a fenced
// write with its token) until stdin ends.
func childHolder(args []string) error {
	addr, name, mode := args[0], args[1], args[3]
	lease, err := time.ParseDuration(args[2])
	if err != nil {
		return err
	}
	pool := &redis.Pool{MaxIdle: 8, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
	b := bredigo.New(pool)
	defer b.Close()
	opt := mutex.WithWatchdog(lease)
	if mode == "fixed" {
		opt = mutex.WithLease(lease)
	}
	m := mutex.New(b, name, opt, mutex.WithLogger(nil))
	ctx := dsync.WithOwner(context.Background())
	if err := m.LockContext(ctx); err != nil {
		return err
	}
	token, _ := m.Token(ctx)
	var out sync.Mutex
	say := func(format string, a ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	say("locked %d", token)
	go func() {
		<-m.Done(ctx)
		say("lost")
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd := strings.Fields(in.Text())
		switch {
		case len(cmd) == 1 && cmd[0] == "unlock":
			say("unlocked %v", m.UnlockContext(ctx))
		case len(cmd) == 3 && cmd[0] == "write":
			var v int64
			fmt.Sscan(cmd[2], &v)
			ok, err := register{addr: cmd[1], key: "register"}.Write(ctx, token, v)
			say("write %v %v", ok, err)
		}
	}
	return nil
}

// child is a client process started by a test.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string   // its output, closed at its end
	read  chan struct{} // closed when its output is read to the end

	once   sync.Once
	waited error
}

// startChild starts the test binary as a client process with the given
// role and arguments; it is killed when t ends.
func startChild(t testing.TB, args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, " "))
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
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1024), read: make(chan struct{})}
	go func() {
		defer close(c.read)
		defer close(c.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			c.lines <- s.Text()
		}
	}()
	t.Cleanup(c.kill)
	return c
}

// expect returns the next line of the child's output, which must start
// with prefix, waiting at most d.
func (c *child) expect(t testing.TB, prefix string, d time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatalf("child exited; want %q", prefix)
		}
		if !strings.HasPrefix(line, prefix) {
			t.Fatalf("child said %q; want %q", line, prefix)
		}
		return strings.TrimSpace(strings.TrimPrefix(line, prefix))
	case <-time.After(d):
		t.Fatalf("child said nothing for %v; want %q", d, prefix)
	}
	return ""
}

func (c *child) send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (c *child) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the child to exit, once its output is read, and returns
// its exit error. Its output is not consumed: lines not yet received stay
// in c.lines.
func (c *child) wait() error {
	c.once.Do(func() {
		<-c.read
		c.waited = c.cmd.Wait()
	})
	return c.waited
}

// kill ends the child with SIGKILL, as a crash would, and reaps it.
func (c *child) kill() {
	c.cmd.Process.Kill()
	c.wait()
}

// unlock has a holder child unlock and returns its unlock's result
// ("<nil>" when it still held). Its Done closes during the unlock, so a
// "lost" line may come before "unlocked": it is skipped.
func (c *child) unlock(t testing.TB, d time.Duration) string {
	t.Helper()
	c.send(t, "unlock")
	deadline := time.After(d)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatal(`child exited; want "unlocked"`)
			}
			if line == "lost" {
				continue
			}
			if !strings.HasPrefix(line, "unlocked") {
				t.Fatalf(`child said %q; want "unlocked"`, line)
			}
			return strings.TrimSpace(strings.TrimPrefix(line, "unlocked"))
		case <-deadline:
			t.Fatalf(`child said nothing for %v; want "unlocked"`, d)
		}
	}
}
