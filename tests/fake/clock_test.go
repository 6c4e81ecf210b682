package fake

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
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
	if _, err := c.Do("SET", "old", "v", "PX", ttl.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	s.clock.Lock()
	s.last = s.last.Add(-gap) // the ticks have been late for gap
	s.clock.Unlock()
	if _, err := c.Do("SET", "new", "v", "PX", ttl.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	s.advance(0) // the late tick
	for key, want := range map[string]time.Duration{"new": ttl - 20*time.Millisecond, "old": ttl - gap} {
		left, err := redis.Int64(c.Do("PTTL", key))
		if err != nil {
			t.Fatal(err)
		}
		switch got := time.Duration(left) * time.Millisecond; {
		case key == "new" && got < want:
			t.Errorf("a key set while the ticks were %v late has %v of its %v left; want at least %v", gap, got, ttl, want)
		case key == "old" && got > want:
			t.Errorf("a key set before the ticks were %v late has %v of its %v left; want at most %v", gap, got, ttl, want)
		}
	}
}
