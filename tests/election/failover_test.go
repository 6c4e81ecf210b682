package election_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/election"
)

// childEnv carries a leader process's instructions: address, prefix,
// name, lease and "fixed" or "watchdog", separated by spaces.
const childEnv = "DSYNC_ELECTION_CHILD"

// runChild runs this test binary as a leader process when asked to, and
// reports whether it did: it campaigns, prints "leading <token>", and
// then "lost" if its term ends, until killed.
func runChild() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	f := strings.Fields(spec)
	lease, err := time.ParseDuration(f[3])
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	opt := election.WithWatchdog(lease)
	if f[4] == "fixed" {
		opt = election.WithLease(lease)
	}
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", f[0]) }}
	e := election.New(bredigo.New(pool), f[2], election.WithPrefix(f[1]), opt, election.WithLogger(nil))
	term, err := e.Campaign(context.Background(), "child")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	tok, err := term.Token(context.Background())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("leading", tok)
	<-term.Done()
	fmt.Println("lost")
	select {}
}

// leaderProcess starts a leader process and returns it once it leads,
// with its token; it is killed when t ends.
func leaderProcess(t *testing.T, addr, p, name string, lease time.Duration, mode string) (*exec.Cmd, int64, <-chan string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %v %s", childEnv, addr, p, name, lease, mode))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	line := receive(t, lines, 10*time.Second, "the leader process")
	token, err := strconv.ParseInt(strings.TrimPrefix(line, "leading "), 10, 64)
	if err != nil {
		t.Fatalf("the leader process said %q", line)
	}
	return cmd, token, lines
}

// The leader's process is killed: the next candidate leads within the
// lease and 200ms. With a watchdog lease a live leader keeps its term
// through 3 leases, and its death hands over as quickly.
func TestFailoverWhenLeaderKilled(t *testing.T) {
	const lease = time.Second
	for _, mode := range []string{"fixed", "watchdog"} {
		t.Run(mode, func(t *testing.T) {
			srv := servers(true)["redis"](t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			leader, token, lines := leaderProcess(t, srv.Addr(), p, "failover", lease, mode)
			e := election.New(srv.NewBackend(t), "failover", election.WithPrefix(p), election.WithWatchdog(lease))
			next := campaign(ctx, e, "next")
			awaitQueued(t, ctx, e, 1)
			if mode == "watchdog" {
				time.Sleep(3 * lease)
				select {
				case r := <-next:
					t.Fatalf("the candidate led (%v) while the live leader's watchdog renewed its term", r.err)
				case line := <-lines:
					t.Fatalf("the live leader said %q", line)
				default:
				}
				l, err := e.Leader(ctx)
				if err != nil || l.Token != token {
					t.Fatalf("Leader after 3 leases: %+v, %v; want the child's term %d", l, err, token)
				}
			}
			leader.Process.Kill()
			killed := time.Now()
			r := receive(t, next, lease+5*time.Second, "the next candidate")
			if r.err != nil {
				t.Fatal(r.err)
			}
			took := r.at.Sub(killed)
			t.Logf("leader killed (%s lease %v): the next candidate led %v later", mode, lease, took)
			if took > lease+200*time.Millisecond {
				t.Errorf("the next candidate led %v after the leader was killed; want within the lease %v + 200ms", took, lease)
			}
			if mustToken(t, r.term) <= token {
				t.Errorf("token %d after %d", mustToken(t, r.term), token)
			}
			if err := r.term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
