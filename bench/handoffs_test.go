package bench

import (
	"context"
	"testing"
	"time"
)

func impl(t *testing.T, name string) Impl {
	t.Helper()
	i, ok := lookupImpl(name)
	if !ok {
		t.Fatalf("no implementation %q", name)
	}
	return i
}

// The hand-offs of dsync's releases are counted, whether the contenders
// are goroutines of this process or processes that report them: with
// WithHandoffAfter(0) and a 1ms hold every release finds a waiter and
// hands over, so every acquisition but the first is a hand-off (those made
// by releases after the run's end, to acquisitions that do not count, are
// left out); a peer hands nothing.
func TestHandOffsCounted(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, mode := range []struct {
		name  string
		spawn Spawn
	}{{"goroutines", nil}, {"processes", spawn}} {
		r, err := Contended(ctx, addr, impl(t, "dsync-handoff"), 3, time.Millisecond, 400*time.Millisecond, 0, mode.spawn)
		if err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
		t.Logf("%s: %d hand-offs for %d acquisitions", mode.name, r.HandOffs, r.Acquisitions)
		if r.Acquisitions < 20 || r.HandOffs < r.Acquisitions*4/5 || r.HandOffs > r.Acquisitions+3 {
			t.Errorf("%s: %d hand-offs for %d acquisitions; want nearly all of them but the first, and none counted after the end",
				mode.name, r.HandOffs, r.Acquisitions)
		}
		p, err := Contended(ctx, addr, impl(t, "redsync"), 3, time.Millisecond, 200*time.Millisecond, 0, mode.spawn)
		if err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
		if p.HandOffs != 0 {
			t.Errorf("%s: redsync counted %d hand-offs", mode.name, p.HandOffs)
		}
	}
}
