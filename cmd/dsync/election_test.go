package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/election"
)

// The admin commands on an election.

var electionFields = []string{"began_ms", "candidates", "hold_count", "holder", "key", "kind", "lease_ms", "locked", "name", "token", "value", "waiters"}

// lead makes a leader with value in the election name on addr, and queues
// candidates with the given values behind it, each in a "process" of its
// own; the leader resigns when the test ends.
func lead(t *testing.T, addr, name, value string, candidates ...string) (*election.Election, *election.Term) {
	t.Helper()
	e := election.New(newBackend(t, addr), name, election.WithLogger(nil))
	term, err := e.Campaign(context.Background(), value)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Resign(context.Background()) })
	for i, v := range candidates {
		c := election.New(newBackend(t, addr), name)
		background(t, func(ctx context.Context) error {
			_, err := c.Campaign(ctx, v)
			return err
		}, func(context.Context) {})
		waitFor(t, "a candidate to queue", func() bool {
			st, err := e.State(context.Background())
			return err == nil && st.Queued == i+1
		})
	}
	return e, term
}

func TestInspectElection(t *testing.T) {
	m := startMini(t)
	e, term := lead(t, m.Addr(), "jobs", "host-a:1", "host-b:2", "host-c:3")
	st, err := e.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "election", "-json", "jobs")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := jsonFields(t, stdout); !slices.Equal(got, electionFields) {
		t.Errorf("fields %q, want %q", got, electionFields)
	}
	s := decodeLock(t, stdout)
	if s.Kind != "election" || s.Key != "dsync:election:{jobs}" || !s.Locked || s.Value != "host-a:1" || s.Holder != st.Owner ||
		s.HoldCount != 1 || s.Token != mustToken(t, term) || s.LeaseMS <= 0 || s.BeganMS != st.Leader.Began.UnixMilli() ||
		s.Waiters != 2 || !slices.Equal(s.Candidates, []string{"host-b:2", "host-c:3"}) {
		t.Errorf("inspect -kind election -json: %+v %+v, waiters %d (state %+v)", s.Exclusive, s.Leadership, s.Waiters, st)
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "election", "jobs")
	for _, want := range []string{`election "jobs": led`, "leader:     host-a:1", "owner:      " + st.Owner, "began:      ",
		"candidates: 2 (next: host-b:2, host-c:3)"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("inspect lacks %q: exit %d\n%s", want, code, stdout)
		}
	}

	// An election nobody leads shows its last token.
	other, err := election.New(newBackend(t, m.Addr()), "other").Campaign(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	otherToken := mustToken(t, other) // drawn while the term is on
	if err := other.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "election", "-json", "other")
	if s := decodeLock(t, stdout); code != exitOK || s.Locked || s.Value != "" || s.Holder != "" || s.Token != otherToken ||
		s.LeaseMS != 0 || s.Waiters != 0 || s.Candidates == nil {
		t.Errorf("an election without a leader: exit %d, %+v %+v", code, s.Exclusive, s.Leadership)
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "election", "other")
	if code != exitOK || !strings.Contains(stdout, `election "other": no leader`) || !strings.Contains(stdout, "last token: ") {
		t.Errorf("inspect of an election without a leader: exit %d\n%s", code, stdout)
	}
}

func TestListElection(t *testing.T) {
	m := startMini(t)
	lead(t, m.Addr(), "b:1", "host-b")
	lead(t, m.Addr(), "a:1", "host-a", "next")
	free, err := election.New(newBackend(t, m.Addr()), "free:1").Campaign(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := free.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "", "list", "-redis", m.Addr(), "-kind", "election", "-json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got []lockState
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("list -json printed %q: %v", stdout, err)
	}
	if len(got) != 2 || got[0].Name != "a:1" || got[0].Value != "host-a" || got[0].Waiters != 1 || got[1].Name != "b:1" || got[1].Value != "host-b" {
		t.Errorf("list -kind election -json: %s", stdout)
	}
	code, stdout, _ = runCmd(t, "", "list", "-redis", m.Addr(), "-kind", "election")
	for _, want := range []string{"NAME", "LEADER", "CANDIDATES", "a:1   host-a", "b:1   host-b"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("list -kind election lacks %q: exit %d\n%s", want, code, stdout)
		}
	}
}

// TestForceUnlockElection: force-unlock ends the term it read, and the
// next candidate leads at once.
func TestForceUnlockElection(t *testing.T) {
	m := startMini(t)
	e, term := lead(t, m.Addr(), "jobs", "host-a")
	next := election.New(newBackend(t, m.Addr()), "jobs")
	led := make(chan *election.Term, 1)
	background(t, func(ctx context.Context) error {
		t, err := next.Campaign(ctx, "host-b")
		if err == nil {
			led <- t
		}
		return err
	}, func(ctx context.Context) {})
	waitFor(t, "the candidate to queue", func() bool {
		st, err := e.State(context.Background())
		return err == nil && st.Queued == 1
	})
	code, stdout, stderr := runCmd(t, "n\n", "force-unlock", "-redis", m.Addr(), "-kind", "election", "jobs")
	if code != exitFailure || !strings.Contains(stderr, `force-unlock election "jobs" led by host-a (owner `) {
		t.Errorf("answer n: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd(t, "y\n", "force-unlock", "-redis", m.Addr(), "-kind", "election", "jobs")
	if code != exitOK || !strings.Contains(stdout, "force-unlocked: it was led by host-a") {
		t.Fatalf("answer y: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var t2 *election.Term
	select {
	case t2 = <-led:
	case <-time.After(10 * time.Second):
		t.Fatal("the next candidate did not lead")
	}
	defer t2.Resign(context.Background())
	select {
	case <-term.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the forced leader was not told")
	}
	if err := term.Resign(context.Background()); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("the forced leader's Resign: %v, want ErrNotHeld", err)
	}
	if l, err := e.Leader(context.Background()); err != nil || l.Value != "host-b" || l.Token != mustToken(t, t2) {
		t.Errorf("Leader after force-unlock: %+v, %v", l, err)
	}
}

// mustToken returns term's fencing token, and fails the test if Token
// returns an error. Not for goroutines other than the test's.
func mustToken(t testing.TB, term *election.Term) int64 {
	t.Helper()
	tok, err := term.Token(context.Background())
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	return tok
}
