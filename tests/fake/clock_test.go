package fake

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// A key set while the clock's ticks are late (a loaded machine) is not
// charged with the time that passed before it was set: the command first
// brings the TTLs up to date. Before, the late tick charged it with the
// whole gap, and a 900ms lease expired after some 890ms.
func TestKeySetWhileTicksLateKeepsItsTTL(t *testing.T) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := newServer(m) // its clock does not tick: the test ticks it
	c, err := redis.DialContext(context.Background(), "tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const gap, ttl = 200 * time.Millisecond, 300 * time.Millisecond
	pttl := func(key string) time.Duration {
		t.Helper()
		ms, err := redis.Int64(c.Do("PTTL", key))
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ms) * time.Millisecond
	}
	if _, err := c.Do("SET", "old", "v", "PX", (4 * ttl).Milliseconds()); err != nil {
		t.Fatal(err)
	}

	s.last.Add(-int64(gap)) // the ticks have been late for gap
	set := time.Now()
	if _, err := c.Do("SET", "new", "v", "PX", ttl.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	s.advance(0) // the late tick
	// It may be charged the time since it was set, not more (and a
	// millisecond of rounding).
	if got, want := pttl("new"), ttl-time.Since(set)-time.Millisecond; got < want {
		t.Errorf("a key set while the ticks were %v late has %v of its %v left; want at least %v", gap, got, ttl, want)
	}
	if got, want := pttl("old"), 4*ttl-gap; got > want {
		t.Errorf("a key set before the ticks were %v late has %v of its %v left; want at most %v", gap, got, 4*ttl, want)
	}

	// A script's commands come through the hook while the script holds
	// the server's lock: they must not wait for it.
	s.last.Add(-int64(gap))
	set = time.Now()
	if _, err := redis.DoWithTimeout(c, 5*time.Second, "EVAL", "return redis.call('SET', KEYS[1], 'v', 'PX', ARGV[1])", 1, "scripted", ttl.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	s.advance(0)
	if got, want := pttl("scripted"), ttl-time.Since(set)-time.Millisecond; got < want {
		t.Errorf("a key a script set while the ticks were %v late has %v of its %v left; want at least %v", gap, got, ttl, want)
	}
}

// A command a script makes never waits for the server's lock, which the
// script holds, whatever it is: a script's EVAL, which the server refuses
// with an error reply, included. Before, the clock's pre-hook advanced
// the TTLs for it as for a script's own EVAL, and the server hung.
func TestScriptsNestedEvalIsAnsweredWhileTicksLate(t *testing.T) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	s := newServer(m)
	// The ticks fall late while the script runs: its PING marks them so,
	// deterministically, before its EVAL comes through the hook.
	m.Server().SetPreHook(func(p *server.Peer, cmd string, args ...string) bool {
		if cmd == "PING" {
			s.last.Add(-int64(200 * time.Millisecond))
		}
		return s.beforeCommand(p, cmd, args...)
	})
	c, err := redis.DialContext(context.Background(), "tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A first command, after which the connection has a context.
	if _, err := c.Do("ECHO", "x"); err != nil {
		t.Fatal(err)
	}
	reply, err := redis.DoWithTimeout(c, 5*time.Second, "EVAL",
		"redis.call('PING'); local r = redis.pcall('EVAL', 'return 1', 0); return type(r) == 'table' and r.err ~= nil and 1 or 0", 0)
	if err != nil {
		// The server is stuck under its lock: closing it would hang too.
		t.Fatalf("a script calling EVAL while the ticks were late: %v", err)
	}
	m.Close()
	if n, _ := redis.Int(reply, nil); n != 1 {
		t.Errorf("a script's EVAL: reply %v, want an error reply", reply)
	}
}
