package bench

import (
	"context"
	"testing"
	"time"
)

// The goroutine rows' contenders share one client per implementation, as
// a service's goroutines do: the clients Shared gives have no connections
// of their own, and for dsync the one backend's one pub/sub connection
// wakes them all and its hand-offs still count, where contenders with a
// client each hold a pub/sub connection each.
func TestGoroutineRowsShareOneClient(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const contenders = 4
	for _, gi := range GoroutineImpls() {
		if gi.Shared == nil {
			t.Fatalf("%s: the goroutine rows' implementation shares no client", gi.Name)
		}
		var c counter
		newClient, closeAll := gi.Shared(addr, &c)
		for _, cl := range []Client{newClient("a"), newClient("b")} {
			switch cl := cl.(type) {
			case *dsyncClient:
				if cl.pool != nil || cl.b != nil {
					t.Errorf("%s: a contender's client has a pool or backend of its own", gi.Name)
				}
			case *redsyncClient:
				if cl.pools != nil || cl.close != nil {
					t.Errorf("%s: a contender's client has a pool of its own", gi.Name)
				}
			default:
				t.Errorf("%s: a contender's client is a %T", gi.Name, cl)
			}
			cl.Close()
		}
		closeAll()

		r, err := Contended(ctx, addr, gi, contenders, time.Millisecond, 400*time.Millisecond, 0, nil)
		if err != nil {
			t.Fatalf("%s: %v", gi.Name, err)
		}
		t.Logf("%s: %d acquisitions, %d hand-offs, %d pub/sub connections", gi.Name, r.Acquisitions, r.HandOffs, r.PubSubConns)
		if r.Acquisitions < 20 {
			t.Errorf("%s: %d acquisitions in 400ms with a 1ms hold; want at least 20", gi.Name, r.Acquisitions)
		}
		if gi.Name == "redsync" {
			continue
		}
		// Every release with a 1ms hold finds a waiter past the
		// default's threshold too: both modes hand over.
		if r.HandOffs < r.Acquisitions*4/5 || r.HandOffs > r.Acquisitions+contenders {
			t.Errorf("%s: %d hand-offs for %d acquisitions on the shared backend; want nearly all of them", gi.Name, r.HandOffs, r.Acquisitions)
		}
		if r.PubSubConns != 1 {
			t.Errorf("%s: %d pub/sub connections mid-run; want the shared backend's one", gi.Name, r.PubSubConns)
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
