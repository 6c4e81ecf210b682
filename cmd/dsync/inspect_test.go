package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/mutex"
)

// decodeLock decodes inspect -json's output, requiring exactly the
// documented fields.
func decodeLock(t *testing.T, out string) lockState {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatalf("inspect -json printed %q: %v", out, err)
	}
	var s lockState
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("inspect -json printed %q: %v", out, err)
	}
	want := []string{"kind", "name", "key", "locked", "waiters"}
	if s.Kind != kindSemaphore && s.Kind != kindWaitGroup {
		want = append(want, "holder", "hold_count", "token", "lease_ms")
	}
	for _, f := range want {
		if _, ok := fields[f]; !ok {
			t.Errorf("inspect -json lacks %q: %s", f, out)
		}
	}
	return s
}

// waitFor polls cond, an observation of the server, until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInspectMutexJSON(t *testing.T) {
	m := startMini(t)
	ctx := dsync.WithOwner(context.Background())
	holder, _ := dsync.OwnerFrom(ctx)
	const name = "orders:42"
	mu := mutex.New(newBackend(t, m.Addr()), name)
	for range 2 {
		if err := mu.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	defer mu.UnlockContext(ctx)
	defer mu.UnlockContext(ctx)
	token, err := mu.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A waiter in another "process", with an owner of its own.
	wctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
	waiter, _ := dsync.OwnerFrom(wctx)
	waited := make(chan error, 1)
	other := mutex.New(newBackend(t, m.Addr()), name)
	go func() { waited <- other.LockContext(wctx) }()
	defer func() {
		cancel()
		if err := <-waited; err == nil {
			other.UnlockContext(wctx)
		}
	}()
	waitFor(t, "the waiter to register", func() bool {
		st, err := mu.State(ctx)
		return err == nil && st.Waiters == 1
	})

	// Flags after the name.
	code, stdout, stderr := runCmd(t, "", "inspect", name, "-redis", m.Addr(), "-json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s := decodeLock(t, stdout)
	want := lockState{Kind: "mutex", Name: name, Key: "dsync:mutex:{orders:42}", Locked: true,
		Exclusive: &Exclusive{Holder: holder, HoldCount: 2, Token: token, LeaseMS: s.LeaseMS}, Waiters: 1, NextWaiters: []string{waiter}}
	if s.LeaseMS <= 0 || s.LeaseMS > 30000 {
		t.Errorf("lease_ms %d, want in (0, 30000]", s.LeaseMS)
	}
	if s.Kind != want.Kind || s.Name != want.Name || s.Key != want.Key || s.Locked != want.Locked || s.Holder != want.Holder ||
		s.HoldCount != want.HoldCount || s.Token != want.Token || s.Waiters != want.Waiters || !slices.Equal(s.NextWaiters, want.NextWaiters) {
		t.Errorf("inspect -json:\n got %+v\nwant %+v", s, want)
	}

	// The text form says the same.
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), name)
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{`mutex "orders:42": locked`, holder, "hold count: 2", "waiters:    1 (next: " + waiter + ")"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect lacks %q:\n%s", want, stdout)
		}
	}
}

func TestInspectFreeMutex(t *testing.T) {
	m := startMini(t)
	ctx := dsync.WithOwner(context.Background())
	mu := mutex.New(newBackend(t, m.Addr()), "a{b}%c")
	if err := mu.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	token, _ := mu.Token(ctx)
	if err := mu.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "", "inspect", "-redis", m.Addr(), "-json", "--", "a{b}%c")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s := decodeLock(t, stdout)
	if s.Locked || s.Holder != "" || s.HoldCount != 0 || s.Token != token || s.LeaseMS != 0 || s.Waiters != 0 ||
		s.NextWaiters == nil || len(s.NextWaiters) != 0 || s.Key != "dsync:mutex:{a%7Bb%7D%25c}" {
		t.Errorf("inspect -json of a freed mutex: %+v (last token %d)", s, token)
	}
}

func TestInspectFairlockJSON(t *testing.T) {
	m := startMini(t)
	ctx := dsync.WithOwner(context.Background())
	holder, _ := dsync.OwnerFrom(ctx)
	fl := fairlock.New(newBackend(t, m.Addr()), "queue:7", fairlock.WithPrefix("app"))
	if err := fl.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer fl.UnlockContext(ctx)
	token, _ := fl.Token(ctx)

	wctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
	waited := make(chan error, 1)
	other := fairlock.New(newBackend(t, m.Addr()), "queue:7", fairlock.WithPrefix("app"))
	go func() { waited <- other.LockContext(wctx) }()
	defer func() {
		cancel()
		if err := <-waited; err == nil {
			other.UnlockContext(wctx)
		}
	}()
	waitFor(t, "the waiter to queue", func() bool {
		st, err := fl.State(ctx)
		return err == nil && st.Queued == 1
	})

	code, stdout, stderr := runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "fairlock", "-prefix", "app", "-json", "queue:7")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s := decodeLock(t, stdout)
	if s.Kind != "fairlock" || s.Key != "app:fairlock:{queue:7}" || !s.Locked || s.Holder != holder || s.HoldCount != 1 ||
		s.Token != token || s.LeaseMS <= 0 || s.Waiters != 1 || s.NextWaiters != nil {
		t.Errorf("inspect -kind fairlock -json: %+v (holder %s, token %d)", s, holder, token)
	}
	if strings.Contains(stdout, "next_waiters") {
		t.Errorf("fairlock JSON has next_waiters: %s", stdout)
	}
	// The same name as a mutex is another lock: free.
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-prefix", "app", "queue:7")
	if code != exitOK || !strings.Contains(stdout, `mutex "queue:7": free`) {
		t.Errorf("inspect of the mutex of the same name: exit %d\n%s", code, stdout)
	}
}

// TestDsyncRedisEnv: without -redis, the admin commands and doctor use
// $DSYNC_REDIS.
func TestDsyncRedisEnv(t *testing.T) {
	m := startMini(t)
	t.Setenv("DSYNC_REDIS", m.Addr())
	for _, args := range [][]string{{"inspect", "x"}, {"list"}, {"force-unlock", "-yes", "x"}} {
		if code, stdout, stderr := runCmd(t, "", args...); code != exitOK {
			t.Errorf("dsync %q with $DSYNC_REDIS: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
	if _, stdout, _ := runCmd(t, "", "doctor"); !strings.Contains(stdout, "redis at "+m.Addr()) {
		t.Errorf("doctor with $DSYNC_REDIS checked another server:\n%s", stdout)
	}
}
