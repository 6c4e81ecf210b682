// Package election_test holds the acceptance tests of package election
// (issue 28): one leader at a time and fair turns, failover when a
// leader's process is killed, the hand-over by Resign, what a cancelled
// Campaign leaves, ended terms, and what observers see. They run on a
// real redis-server, and on miniredis where no process or timing of a
// real server is under test.
package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/tests/fake"
)

func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	testserver.Main(m, fake.StopShared)
}

// server is a server the tests run on: a real redis-server or miniredis.
type server interface {
	Addr() string
	NewBackend(t testing.TB, opts ...bredigo.Option) backend.Backend
}

// servers returns the servers a test runs on, by name: a real
// redis-server (skipped without one), and miniredis unless realOnly.
func servers(realOnly bool) map[string]func(t *testing.T) server {
	m := map[string]func(t *testing.T) server{
		"redis": func(t *testing.T) server { return testserver.Real(t) },
	}
	if !realOnly {
		m["miniredis"] = func(t *testing.T) server { return fake.Mini(t) }
	}
	return m
}

// prefix returns a fresh key prefix for one test.
func prefix() string { return "elect:" + dsync.NewID()[:10] }

type campaignResult struct {
	term *election.Term
	err  error
	at   time.Time
}

// campaign starts e.Campaign in the background.
func campaign(ctx context.Context, e *election.Election, value string) <-chan campaignResult {
	c := make(chan campaignResult, 1)
	go func() {
		t, err := e.Campaign(ctx, value)
		c <- campaignResult{t, err, time.Now()}
	}()
	return c
}

// awaitQueued waits until n candidates are queued in e.
func awaitQueued(t *testing.T, ctx context.Context, e *election.Election, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		st, err := e.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued >= n {
			return
		}
		if time.Now().After(deadline) || i > 10000 {
			t.Fatalf("%d candidates not queued within 10s (%d are)", n, st.Queued)
		}
		time.Sleep(time.Millisecond)
	}
}

// receive returns what c yields within d.
func receive[T any](t *testing.T, c <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v, ok := <-c:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, d)
		panic("unreachable")
	}
}

// closes fails t unless c is closed within d.
func closes(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("%s: not closed within %v", what, d)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func notHeld(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("%s: %v; want an error matching dsync.ErrNotHeld", what, err)
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
