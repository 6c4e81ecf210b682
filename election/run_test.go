package election_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// runChildEnv carries a child candidate's instructions: address, prefix,
// name, watchdog lease and the candidate's value, separated by spaces.
const runChildEnv = "DSYNC_ELECTION_RUN_CHILD"

// runChild runs this test binary as a candidate process when asked to,
// and reports whether it did: it runs the leadership loop, printing
// "lead VALUE TOKEN" when a term starts and "end VALUE" when it ends,
// until killed.
func runChild() bool {
	spec := os.Getenv(runChildEnv)
	if spec == "" {
		return false
	}
	f := strings.Fields(spec)
	lease, _ := time.ParseDuration(f[3])
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", f[0]) }}
	e := election.New(bredigo.New(pool), f[2], election.WithPrefix(f[1]), election.WithWatchdog(lease), election.WithLogger(nil))
	err := e.Run(context.Background(), f[4], func(ctx context.Context, t *election.Term) error {
		tok, err := t.Token(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("lead %s %d\n", f[4], tok)
		<-ctx.Done()
		fmt.Printf("end %s\n", f[4])
		return ctx.Err()
	})
	fmt.Fprintln(os.Stderr, "child candidate: Run returned", err)
	os.Exit(3)
	return true
}

// candidateEvent is a line a child candidate printed.
type candidateEvent struct {
	child int
	line  string
	at    time.Time
}

// TestRunFailsOverWhenLeaderKilled: two processes run the leadership loop;
// the leader's process is killed, and the other one's lead starts within
// the lease (plus a round trip), with a greater token.
func TestRunFailsOverWhenLeaderKilled(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	srv := testserver.Real(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prefix := "run:" + dsync.NewID()[:8]
	events := make(chan candidateEvent, 16)
	var children [2]*exec.Cmd
	for i := range children {
		c := exec.Command(exe, "-test.run=^$")
		c.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s jobs %v c%d", runChildEnv, srv.Addr(), prefix, lease, i))
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = c
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		go func() {
			s := bufio.NewScanner(out)
			for s.Scan() {
				events <- candidateEvent{i, s.Text(), time.Now()}
			}
		}()
	}
	next := func(what string, d time.Duration) candidateEvent {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(d):
			t.Fatalf("%s: nothing within %v", what, d)
			panic("unreachable")
		}
	}
	first := next("the first leader", 10*time.Second)
	var leader, token int
	if _, err := fmt.Sscanf(first.line, "lead c%d %d", &leader, &token); err != nil {
		t.Fatalf("first line %q: %v", first.line, err)
	}
	killed := time.Now()
	children[leader].Process.Kill()
	children[leader].Wait()
	ev := next("the next leader", lease+2*time.Second)
	var second, token2 int
	if _, err := fmt.Sscanf(ev.line, "lead c%d %d", &second, &token2); err != nil || second == leader {
		t.Fatalf("after the kill: %q from child %d, want the other child's lead", ev.line, ev.child)
	}
	took := ev.at.Sub(killed)
	t.Logf("leader c%d killed; c%d led %v later (lease %v), token %d -> %d", leader, second, took.Round(time.Millisecond), lease, token, token2)
	if bound := lease + 200*time.Millisecond; took > bound {
		t.Errorf("the next lead started %v after the kill, want within the lease plus a round trip (%v)", took, bound)
	}
	if token2 <= token {
		t.Errorf("token %d after %d, want greater", token2, token)
	}
}

// TestRunResignsWhenCtxEnds: ending Run's ctx ends the lead's context,
// Run returns an error matching ctx.Err(), and the term is resigned (the
// next candidate leads at once, not when the lease runs out).
func TestRunResignsWhenCtxEnds(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	name := "run:" + dsync.NewID()[:8]
	e := election.New(srv.NewBackend(t), name) // a 30s lease: an expiry would be seen
	ctx, cancel := context.WithCancel(context.Background())
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, "a", func(ctx context.Context, _ *election.Term) error {
			close(leading)
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	select {
	case <-leading:
	case <-time.After(5 * time.Second):
		t.Fatal("Run never led")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5s after its ctx ended")
	}
	term, ok, err := election.New(srv.NewBackend(t), name).TryCampaign(context.Background(), "b")
	if !ok || err != nil {
		t.Fatalf("another candidate after Run returned: %v, %v; want it to lead (the term resigned)", ok, err)
	}
	term.Resign(context.Background())
}

// TestRunCampaignsAgainAfterLead: a lead that returns nil is followed by
// another term; one that fails while leading ends Run with its error,
// resigned.
func TestRunCampaignsAgainAfterLead(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	name := "run:" + dsync.NewID()[:8]
	e := election.New(srv.NewBackend(t), name)
	errStop := errors.New("stop")
	var terms atomic.Int32
	var tokens []int64
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := e.Run(ctx, "a", func(ctx context.Context, term *election.Term) error {
		tok, err := term.Token(ctx)
		if err != nil {
			return err
		}
		tokens = append(tokens, tok)
		if terms.Add(1) < 3 {
			return nil
		}
		return errStop
	})
	if !errors.Is(err, errStop) || terms.Load() != 3 {
		t.Fatalf("Run returned %v after %d terms, want errStop after 3", err, terms.Load())
	}
	if !(tokens[0] < tokens[1] && tokens[1] < tokens[2]) {
		t.Errorf("tokens %v, want increasing: a term each", tokens)
	}
	if _, err := e.Leader(context.Background()); !errors.Is(err, dsync.ErrNoLeader) {
		t.Errorf("Leader after Run returned: %v, want ErrNoLeader (resigned)", err)
	}
}

// TestRunReturnsPermanentErrors: errors that cannot pass end Run at once:
// bad arguments, a closed backend, a key dsync did not write.
func TestRunReturnsPermanentErrors(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	never := func(context.Context, *election.Term) error {
		t.Error("lead called")
		return nil
	}
	closed := srv.NewBackend(t)
	closed.Close()
	foreign := "run:" + dsync.NewID()[:8]
	if _, err := srv.Do(context.Background(), "SADD", "dsync:election:{"+foreign+"}", "x"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		e    *election.Election
		want error
	}{
		{"empty name", election.New(srv.NewBackend(t), ""), dsync.ErrInvalidName},
		{"nil backend", election.New(nil, "x"), dsync.ErrInvalidBackend},
		{"closed backend", election.New(closed, "run:"+dsync.NewID()[:8]), dsync.ErrClosed},
		{"foreign key", election.New(srv.NewBackend(t), foreign), dsync.ErrUnexpectedReply},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := c.e.Run(ctx, "a", never)
		cancel()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Run returned %v, want %v", c.what, err, c.want)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: Run returned after %v, want at once", c.what, took)
		}
	}
	if err := election.New(srv.NewBackend(t), "x").Run(context.Background(), "a", nil); err == nil {
		t.Error("Run with a nil lead: no error")
	}
}
