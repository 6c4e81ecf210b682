package dsyncgocron_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"

	dsyncgocron "github.com/dsyncgo/dsync/integrations/gocron"
)

// TestLockerOneRunAtATime: while one scheduler's Lock holds a job,
// another's returns ErrHeld; Unlock frees it, once, and Token is the
// hold's while it is held.
func TestLockerOneRunAtATime(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	ctx := context.Background()
	key := "job:" + dsync.NewID()[:8]
	a, b := dsyncgocron.NewLocker(srv.NewBackend(t)), dsyncgocron.NewLocker(srv.NewBackend(t))
	la, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := a.Token(key); tok <= 0 || err != nil {
		t.Errorf("Token while held: %d, %v", tok, err)
	}
	if _, err := b.Token(key); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Token where the job does not run: %v, want ErrNotHeld", err)
	}
	if _, err := b.Lock(ctx, key); !errors.Is(err, dsyncgocron.ErrHeld) {
		t.Fatalf("a second scheduler's Lock: %v, want ErrHeld", err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Token(key); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Token after Unlock: %v, want ErrNotHeld", err)
	}
	lb, err := b.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Errorf("a second Unlock: %v, want the first's nil", err)
	}
	if _, err := a.Lock(ctx, key); !errors.Is(err, dsyncgocron.ErrHeld) {
		t.Errorf("a second Unlock released the other scheduler's hold: Lock %v", err)
	}
	lb.Unlock(ctx)
}

// TestLockerMinHold: Unlock after a quick run keeps the mutex until the
// minimum hold has passed; an ended ctx (a scheduler's shutdown) still
// releases.
func TestLockerMinHold(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	const minHold = 300 * time.Millisecond
	key := "job:" + dsync.NewID()[:8]
	l := dsyncgocron.NewLocker(srv.NewBackend(t), dsyncgocron.WithMinHold(minHold))
	taken := time.Now()
	h, err := l.Lock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Unlock(ended); err != nil {
		t.Fatal(err)
	}
	if held := time.Since(taken); held < minHold {
		t.Errorf("released %v after Lock, want at least %v", held, minHold)
	}
	h2, err := l.Lock(context.Background(), key)
	if err != nil {
		t.Fatalf("Lock after the release: %v", err)
	}
	h2.Unlock(context.Background())
}

// TestLockerBadKey: an empty job name is dsync.ErrInvalidName.
func TestLockerBadKey(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	if _, err := dsyncgocron.NewLocker(srv.NewBackend(t)).Lock(context.Background(), ""); !errors.Is(err, dsync.ErrInvalidName) {
		t.Errorf("Lock of an empty key: %v, want ErrInvalidName", err)
	}
}

// TestElectorLeadsWhileRunning: IsLeader is ErrNotLeader before Run
// leads and after its ctx ends, nil in between, and Term is the term.
func TestElectorLeadsWhileRunning(t *testing.T) {
	t.Parallel()
	srv := testserver.Real(t)
	el := dsyncgocron.NewElector(election.New(srv.NewBackend(t), "sched:"+dsync.NewID()[:8]), "a")
	if err := el.IsLeader(context.Background()); !errors.Is(err, dsyncgocron.ErrNotLeader) {
		t.Fatalf("IsLeader before Run: %v, want ErrNotLeader", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for el.IsLeader(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("not leading 5s after Run")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if term := el.Term(); term == nil {
		t.Errorf("Term while leading: nil")
	} else if tok, err := term.Token(context.Background()); err != nil || tok <= 0 {
		t.Errorf("Term while leading: Token = %d, %v; want a token", tok, err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if err := el.IsLeader(context.Background()); !errors.Is(err, dsyncgocron.ErrNotLeader) {
		t.Errorf("IsLeader after Run: %v, want ErrNotLeader", err)
	}
}
