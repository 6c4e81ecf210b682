package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/mutex"
)

func TestList(t *testing.T) {
	m := startMini(t)
	b := newBackend(t, m.Addr())
	ctx := dsync.WithOwner(context.Background())
	holder, _ := dsync.OwnerFrom(ctx)
	lock := func(l dsync.Locker) {
		t.Helper()
		if err := l.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.UnlockContext(ctx) })
	}
	// Held: two mutexes, one with braces and a percent sign in its name,
	// one of them with a waiter (so a :queue key exists).
	lock(mutex.New(b, "held:1"))
	lock(mutex.New(b, "we{ird}%7D"))
	// Freed: only its fence key is left, with the last token.
	freed := mutex.New(b, "freed:1")
	if err := freed.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := freed.Token(ctx); err != nil {
		t.Fatal(err)
	}
	if err := freed.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	// Other prefixes and kinds are not listed with the defaults.
	lock(mutex.New(b, "elsewhere", mutex.WithPrefix("other")))
	lock(fairlock.New(b, "fair:1"))
	if !m.Exists("dsync:mutex:{freed:1}:fence") {
		t.Fatalf("expected the freed mutex's keys, have %q", m.Keys())
	}

	code, stdout, stderr := runCmd(t, "", "list", "-redis", m.Addr(), "-json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got []lockState
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("list -json printed %q: %v", stdout, err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
		if !s.Locked || s.Holder != holder || s.HoldCount != 1 || s.LeaseMS <= 0 || s.Kind != "mutex" {
			t.Errorf("list -json: %+v", s)
		}
	}
	if strings.Join(names, " ") != "held:1 we{ird}%7D" {
		t.Errorf("list -json names %q, want [held:1 we{ird}%%7D]; keys on the server: %q", names, m.Keys())
	}

	code, stdout, _ = runCmd(t, "", "list", "-redis", m.Addr())
	if code != exitOK || !strings.Contains(stdout, "held:1") || !strings.Contains(stdout, "we{ird}%7D") ||
		strings.Contains(stdout, "freed") || !strings.Contains(stdout, holder) || !strings.HasPrefix(stdout, "NAME") {
		t.Errorf("list: exit %d\n%s", code, stdout)
	}

	code, stdout, _ = runCmd(t, "", "list", "-redis", m.Addr(), "-kind", "fairlock", "-json")
	if code != exitOK || !strings.Contains(stdout, `"name": "fair:1"`) || strings.Contains(stdout, "held:1") {
		t.Errorf("list -kind fairlock: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runCmd(t, "", "list", "-redis", m.Addr(), "-prefix", "other", "-json")
	if code != exitOK || !strings.Contains(stdout, `"name": "elsewhere"`) || strings.Contains(stdout, "held:1") {
		t.Errorf("list -prefix other: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr = runCmd(t, "", "list", "-redis", m.Addr(), "-prefix", "nothing*here")
	if code != exitOK || stdout != "" || !strings.Contains(stderr, "no held mutex") {
		t.Errorf("list of an empty prefix: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCmd(t, "", "list", "-redis", m.Addr(), "-prefix", "nothing", "-json")
	if code != exitOK || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list -json of an empty prefix: exit %d\n%s", code, stdout)
	}
}

func TestLockName(t *testing.T) {
	for key, want := range map[string]string{
		"dsync:mutex:{a}":           "a",
		"dsync:mutex:{a:b}":         "a:b",
		"dsync:mutex:{a%7Bb%7D%25}": "a{b}%",
		"dsync:mutex:{%257D}":       "%7D",
		"dsync:mutex:{a}:fence":     "",
		"dsync:mutex:{a}:waiters":   "",
		"dsync:mutex:{}":            "",
		"dsync:mutex:a":             "",
		"dsync:rwlock:{a}":          "",
	} {
		got, ok := lockName(key, "dsync:mutex:")
		if got != want || ok != (want != "") {
			t.Errorf("lockName(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
}
