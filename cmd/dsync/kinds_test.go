package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// The admin commands on a read-write lock and a semaphore.

// jsonFields returns the names of the fields of the JSON object out.
func jsonFields(t *testing.T, out string) []string {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	return slices.Sorted(maps.Keys(fields))
}

var (
	rwlockFields    = []string{"hold_count", "holder", "key", "kind", "lease_ms", "locked", "mode", "name", "readers", "token", "waiters", "waiting_readers", "waiting_writers"}
	semaphoreFields = []string{"available", "capacity", "capacity_set", "held", "holders", "key", "kind", "locked", "name", "waiters"}
)

// background runs f in a goroutine with a context cancelled when the test
// ends, which then waits for it; undo runs if f succeeded.
func background(t *testing.T, f func(ctx context.Context) error, undo func(ctx context.Context)) <-chan error {
	ctx, cancel := context.WithCancel(dsync.WithOwner(context.Background()))
	done := make(chan error, 1)
	res := make(chan error, 1)
	go func() {
		err := f(ctx)
		done <- err
		res <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err == nil {
			undo(context.Background())
		}
	})
	return res
}

func TestInspectRWLock(t *testing.T) {
	m := startMini(t)
	ctx := dsync.WithOwner(context.Background())
	writer, _ := dsync.OwnerFrom(ctx)
	l := rwlock.New(newBackend(t, m.Addr()), "config")
	if err := l.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.UnlockContext(ctx)
	token, _ := l.Token(ctx)
	// A writer and a reader wait, each in a "process" of its own.
	w := rwlock.New(newBackend(t, m.Addr()), "config")
	background(t, w.LockContext, func(context.Context) {})
	r := rwlock.New(newBackend(t, m.Addr()), "config")
	background(t, r.RLockContext, func(context.Context) {})
	waitFor(t, "a writer and a reader to wait", func() bool {
		st, err := l.State(ctx)
		return err == nil && st.WaitingWriters == 1 && st.WaitingReaders == 1
	})

	code, stdout, stderr := runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "rwlock", "-json", "config")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := jsonFields(t, stdout); !slices.Equal(got, rwlockFields) {
		t.Errorf("fields %q, want %q", got, rwlockFields)
	}
	s := decodeLock(t, stdout)
	if s.Kind != "rwlock" || s.Key != "dsync:rwlock:{config}" || !s.Locked || s.Mode != "write" || s.Holder != writer ||
		s.HoldCount != 1 || s.Token != token || s.LeaseMS <= 0 || s.Readers != 0 || s.WaitingWriters != 1 ||
		s.WaitingReaders != 1 || s.Waiters != 2 {
		t.Errorf("inspect -kind rwlock -json: %+v %+v (writer %s, token %d)", s.Exclusive, s.ReadWrite, writer, token)
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "rwlock", "config")
	for _, want := range []string{`rwlock "config": write-locked`, "holder:     " + writer, "waiting:    1 writer, 1 reader"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("inspect lacks %q: exit %d\n%s", want, code, stdout)
		}
	}
}

func TestInspectRWLockReaders(t *testing.T) {
	m := startMini(t)
	for range 2 {
		ctx := dsync.WithOwner(context.Background())
		l := rwlock.New(newBackend(t, m.Addr()), "cache")
		if err := l.RLockContext(ctx); err != nil {
			t.Fatal(err)
		}
		defer l.RUnlockContext(ctx)
	}
	code, stdout, stderr := runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "rwlock", "-json", "cache")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s := decodeLock(t, stdout)
	if !s.Locked || s.Mode != "read" || s.Holder != "" || s.HoldCount != 0 || s.LeaseMS != 0 || s.Readers != 2 || s.Waiters != 0 {
		t.Errorf("inspect -kind rwlock -json of a read-held lock: %+v %+v", s.Exclusive, s.ReadWrite)
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "rwlock", "cache")
	if code != exitOK || !strings.Contains(stdout, `rwlock "cache": read-locked`) || !strings.Contains(stdout, "readers:    2") {
		t.Errorf("inspect: exit %d\n%s", code, stdout)
	}
}

func TestInspectSemaphore(t *testing.T) {
	m := startMini(t)
	var sems []*semaphore.Semaphore
	for _, n := range []int64{2, 3} {
		ctx := dsync.WithOwner(context.Background())
		s := semaphore.New(newBackend(t, m.Addr()), "quota", 5)
		if err := s.Acquire(ctx, n); err != nil {
			t.Fatal(err)
		}
		defer s.Release(ctx, n)
		sems = append(sems, s)
	}
	waiter := semaphore.New(newBackend(t, m.Addr()), "quota", 5)
	background(t, func(ctx context.Context) error { return waiter.Acquire(ctx, 1) }, func(context.Context) {})
	waitFor(t, "a waiter to queue", func() bool {
		st, err := sems[0].State(context.Background())
		return err == nil && st.Queued == 1
	})

	code, stdout, stderr := runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "semaphore", "-json", "quota")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := jsonFields(t, stdout); !slices.Equal(got, semaphoreFields) {
		t.Errorf("fields %q, want %q", got, semaphoreFields)
	}
	s := decodeLock(t, stdout)
	if s.Kind != "semaphore" || s.Key != "dsync:semaphore:{quota}" || !s.Locked || s.Capacity != 5 || s.CapacitySet ||
		s.Held != 5 || s.Available != 0 || s.Holders != 2 || s.Waiters != 1 {
		t.Errorf("inspect -kind semaphore -json: %+v, waiters %d", s.Permits, s.Waiters)
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "semaphore", "quota")
	for _, want := range []string{`semaphore "quota": 5 of 5 permits held`, "holders:    2", "queued:     1"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("inspect lacks %q: exit %d\n%s", want, code, stdout)
		}
	}

	// A free semaphore has no capacity on record, unless one was set.
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "semaphore", "-json", "other")
	if s := decodeLock(t, stdout); code != exitOK || s.Locked || s.Capacity != 0 || s.Available != 0 || s.Held != 0 {
		t.Errorf("a free semaphore: exit %d, %+v", code, s.Permits)
	}
	if err := semaphore.New(newBackend(t, m.Addr()), "other", 1).SetCapacity(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "semaphore", "-json", "other")
	if s := decodeLock(t, stdout); code != exitOK || s.Locked || s.Capacity != 8 || !s.CapacitySet || s.Available != 8 {
		t.Errorf("a free semaphore with a capacity set: exit %d, %+v", code, s.Permits)
	}
}

// TestListRWLockAndSemaphore: list finds a read-write lock held by
// readers only (it has no main key then), and held semaphores; free ones
// are skipped, whatever keys they left.
func TestListRWLockAndSemaphore(t *testing.T) {
	m := startMini(t)
	b := newBackend(t, m.Addr())
	ctx := dsync.WithOwner(context.Background())
	if err := rwlock.New(b, "read:1").RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rwlock.New(b, "write:1").LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	freed := rwlock.New(b, "freed:1")
	if err := freed.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := freed.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := semaphore.New(b, "sem:1", 3).Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := semaphore.New(b, "sem:free", 3).SetCapacity(ctx, 4); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rwlock.New(b, "read:1").RUnlockContext(ctx)
		rwlock.New(b, "write:1").UnlockContext(ctx)
		semaphore.New(b, "sem:1", 3).Release(ctx, 2)
	})

	for _, c := range []struct {
		kind  string
		names string
		table []string
	}{
		{"rwlock", "read:1 write:1", []string{"NAME", "MODE", "READERS", "read:1", "write:1"}},
		{"semaphore", "sem:1", []string{"NAME", "CAPACITY", "AVAILABLE", "sem:1  3"}},
	} {
		code, stdout, stderr := runCmd(t, "", "list", "-redis", m.Addr(), "-kind", c.kind, "-json")
		if code != exitOK {
			t.Fatalf("list -kind %s: exit %d: %s", c.kind, code, stderr)
		}
		var got []lockState
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("list -kind %s -json printed %q: %v", c.kind, stdout, err)
		}
		var names []string
		for _, s := range got {
			names = append(names, s.Name)
			if s.Kind != c.kind || !s.Locked {
				t.Errorf("list -kind %s -json: %+v", c.kind, s)
			}
		}
		if strings.Join(names, " ") != c.names {
			t.Errorf("list -kind %s: names %q, want %s; keys %q", c.kind, names, c.names, m.Keys())
		}
		code, stdout, _ = runCmd(t, "", "list", "-redis", m.Addr(), "-kind", c.kind)
		for _, want := range c.table {
			if code != exitOK || !strings.Contains(stdout, want) {
				t.Errorf("list -kind %s lacks %q: exit %d\n%s", c.kind, want, code, stdout)
			}
		}
	}
}

// TestForceUnlockRWLockReaders: force-unlock takes every read hold and
// hands the lock to the writer waiting.
func TestForceUnlockRWLockReaders(t *testing.T) {
	m := startMini(t)
	for range 2 {
		ctx := dsync.WithOwner(context.Background())
		l := rwlock.New(newBackend(t, m.Addr()), "cfg", rwlock.WithLogger(nil))
		if err := l.RLockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w := rwlock.New(newBackend(t, m.Addr()), "cfg")
	locked := background(t, w.LockContext, func(ctx context.Context) {})
	waitFor(t, "the writer to wait", func() bool {
		st, err := w.State(context.Background())
		return err == nil && st.WaitingWriters == 1
	})

	code, stdout, stderr := runCmd(t, "n\n", "force-unlock", "-redis", m.Addr(), "-kind", "rwlock", "cfg")
	if code != exitFailure || !strings.Contains(stderr, `force-unlock rwlock "cfg" read-held by 2 owners? [y/N]`) {
		t.Errorf("answer n: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd(t, "y\n", "force-unlock", "-redis", m.Addr(), "-kind", "rwlock", "cfg")
	if code != exitOK || !strings.Contains(stdout, "force-unlocked: it was read-held by 2 owners") {
		t.Errorf("answer y: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	select {
	case err := <-locked:
		if err != nil {
			t.Fatalf("the waiting writer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting writer did not get the lock")
	}
	st, err := w.State(context.Background())
	if err != nil || st.Mode != rwlock.Write || st.Readers != 0 {
		t.Errorf("after force-unlock: %+v, %v", st, err)
	}
}

// TestForceUnlockSemaphore: force-unlock takes every permit; the holder
// learns of it at its next renewal, and the waiter queued gets permits at
// its next attempt.
func TestForceUnlockSemaphore(t *testing.T) {
	m := startMini(t)
	ctx := dsync.WithOwner(context.Background())
	holder := semaphore.New(newBackend(t, m.Addr()), "q", 2, semaphore.WithWatchdog(600*time.Millisecond), semaphore.WithLogger(nil))
	if err := holder.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waiter := semaphore.New(newBackend(t, m.Addr()), "q", 2, semaphore.WithWaiterTimeout(900*time.Millisecond))
	acquired := background(t, func(ctx context.Context) error { return waiter.Acquire(ctx, 1) },
		func(ctx context.Context) {})
	waitFor(t, "the waiter to queue", func() bool {
		st, err := holder.State(ctx)
		return err == nil && st.Queued == 1
	})

	code, stdout, stderr := runCmd(t, "", "force-unlock", "-redis", m.Addr(), "-kind", "semaphore", "-yes", "q")
	if code != exitOK || !strings.Contains(stdout, "force-unlocked: it was held by 1 owner, 2 permits in all") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	start := time.Now()
	select {
	case <-holder.Done(ctx):
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told within 10s")
	}
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get a permit within 10s")
	}
	t.Logf("the holder told and the waiter served %v after force-unlock", time.Since(start).Round(time.Millisecond))
	if err := holder.Release(ctx, 2); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("the holder's release after force-unlock: %v, want ErrNotHeld", err)
	}
	code, stdout, _ = runCmd(t, "", "force-unlock", "-redis", m.Addr(), "-kind", "semaphore", "-yes", "other")
	if code != exitOK || !strings.Contains(stdout, "not locked") {
		t.Errorf("a free semaphore: exit %d\n%s", code, stdout)
	}
}
