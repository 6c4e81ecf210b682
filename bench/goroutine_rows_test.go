package bench

import (
	"context"
	"testing"
	"time"
)

// The goroutine rows' contenders share one client per implementation, as
// a service's goroutines do: for dsync one backend, whose one pub/sub
// connection wakes them all and whose hand-offs still count, where
// contenders with a client each hold a pub/sub connection each.
func TestGoroutineRowsShareOneClient(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const contenders = 4
	for _, impl := range GoroutineImpls() {
		if impl.Shared == nil {
			t.Fatalf("%s: the goroutine rows' implementation shares no client", impl.Name)
		}
		r, err := Contended(ctx, addr, impl, contenders, time.Millisecond, 400*time.Millisecond, 0, nil)
		if err != nil {
			t.Fatalf("%s: %v", impl.Name, err)
		}
		t.Logf("%s: %d acquisitions, %d hand-offs, %d pub/sub connections", impl.Name, r.Acquisitions, r.HandOffs, r.PubSubConns)
		if r.Acquisitions < 20 {
			t.Errorf("%s: %d acquisitions in 400ms with a 1ms hold; want at least 20", impl.Name, r.Acquisitions)
		}
		switch impl.Name {
		case "redsync":
			continue
		case "dsync-handoff":
			if r.HandOffs < r.Acquisitions*4/5 || r.HandOffs > r.Acquisitions+contenders {
				t.Errorf("%s: %d hand-offs for %d acquisitions on the shared backend; want nearly all of them", impl.Name, r.HandOffs, r.Acquisitions)
			}
		}
		if r.PubSubConns != 1 {
			t.Errorf("%s: %d pub/sub connections mid-run; want the shared backend's one", impl.Name, r.PubSubConns)
		}
	}
	own, err := Contended(ctx, addr, impl(t, "dsync"), contenders, time.Millisecond, 400*time.Millisecond, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if own.PubSubConns < 2 {
		t.Errorf("dsync, a client each: %d pub/sub connections mid-run; want one per waiting contender", own.PubSubConns)
	}
}
