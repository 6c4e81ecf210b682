//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// TestRunElectTakesTurns starts two dsync run -elect at once on one
// election: their commands never overlap, the second runs after the first
// resigned, each sees its term's token, increasing, and observers see the
// -value of the one that leads.
func TestRunElectTakesTurns(t *testing.T) {
	srv := testserver.Real(t)
	dir := t.TempDir()
	name := testLockName(t)
	script := `mkdir "$D/in" || { echo overlap >>"$D/log"; exit 1; }
echo "start $DSYNC_NAME $DSYNC_TOKEN" >>"$D/log"
echo "leading $DSYNC_TOKEN"
sleep 0.3
echo "end $DSYNC_TOKEN" >>"$D/log"
rmdir "$D/in"`
	var ps []*dsyncProc
	for i := range 2 {
		ps = append(ps, startDsync(t, []string{"D=" + dir}, "run", "-redis", srv.Addr(), "-elect", "-value", "node-"+strconv.Itoa(i),
			"-lease", "5s", name, "--", "sh", "-c", script))
	}
	e := election.New(srv.NewBackend(t), name)
	out := []<-chan string{ps[0].lines, ps[1].lines}
	for range 2 {
		// Whichever leads prints: its value is the leader's.
		var (
			tok string
			ok  bool
		)
		for !ok {
			select {
			case tok, ok = <-out[0]:
				if !ok {
					out[0] = nil
				}
			case tok, ok = <-out[1]:
				if !ok {
					out[1] = nil
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no command ran within 30s")
			}
		}
		l, err := e.Leader(context.Background())
		if err != nil || "leading "+strconv.FormatInt(l.Token, 10) != tok || !strings.HasPrefix(l.Value, "node-") {
			t.Errorf("while the command printed %q: Leader %+v, %v", tok, l, err)
		}
	}
	for i, p := range ps {
		if code := p.wait(t); code != 0 {
			t.Errorf("dsync run -elect %d exited %d\nstderr:\n%s", i, code, &p.stderr)
		}
	}
	checkTurns(t, dir, name)
	if _, err := e.Leader(context.Background()); err == nil {
		t.Error("the election is still led after both commands ended")
	}
}

// TestRunElectWaitRunsOut: with an election led elsewhere, -wait 0 and
// -wait 200ms exit with status 124 without running the command.
func TestRunElectWaitRunsOut(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	term, err := election.New(srv.NewBackend(t), name).Campaign(context.Background(), "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())
	marker := filepath.Join(t.TempDir(), "ran")
	for _, wait := range []string{"0", "200ms"} {
		start := time.Now()
		p := startDsync(t, nil, "run", "-redis", srv.Addr(), "-elect", "-wait", wait, name, "--", "touch", marker)
		if code := p.wait(t); code != exitNotAcquired {
			t.Errorf("-wait %s: exit %d, want %d\nstderr:\n%s", wait, code, exitNotAcquired, &p.stderr)
		}
		// Its standard error is read apart from its exit: wait for it.
		waitFor(t, "the message on stderr", func() bool {
			return strings.Contains(p.stderr.String(), `election "`+name+`" not acquired`)
		})
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("-wait %s: the command ran", wait)
		}
		t.Logf("-wait %s: exit %d after %v", wait, exitNotAcquired, time.Since(start).Round(time.Millisecond))
	}
	st, err := election.New(srv.NewBackend(t), name).State(context.Background())
	if err != nil || st.Queued != 0 || st.Leader.Value != "elsewhere" {
		t.Errorf("after the runs gave up: %+v, %v; want the leader alone", st, err)
	}
}

// TestRunElectKeysDeleted deletes the election's keys from under a running
// command: the command gets SIGTERM at the next renewal (a third of the
// lease), and run exits 123 saying the term was lost.
func TestRunElectKeysDeleted(t *testing.T) {
	srv := testserver.Real(t)
	name := testLockName(t)
	const lease = 900 * time.Millisecond
	p := startDsync(t, nil, "run", "-redis", srv.Addr(), "-elect", "-lease", lease.String(), name, "--",
		"sh", "-c", `trap 'echo TERM; exit 0' TERM; echo "ready $$"; sleep 60 & wait`)
	pid, _ := p.expect(t, "ready ")
	killGroupAtEnd(t, pid)
	key := "dsync:election:{" + name + "}"
	start := time.Now()
	if n, err := srv.Do(context.Background(), "DEL", key, key+":leader"); err != nil || n != int64(2) {
		t.Fatalf("DEL: %v, %v", n, err)
	}
	_, at := p.expect(t, "TERM")
	took := at.Sub(start)
	code := p.wait(t)
	t.Logf("DEL to the command's SIGTERM: %v (lease %v, renewed every %v)", took.Round(time.Millisecond), lease, lease/3)
	if bound := lease/3 + 500*time.Millisecond; took > bound {
		t.Errorf("the command got SIGTERM %v after DEL, want within %v", took, bound)
	}
	if code != exitLost {
		t.Errorf("exit %d, want %d\nstderr:\n%s", code, exitLost, &p.stderr)
	}
	waitFor(t, "the message on stderr", func() bool { return strings.Contains(p.stderr.String(), "lost election") })
}
