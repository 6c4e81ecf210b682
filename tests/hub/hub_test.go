package hub_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/tests/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var publish = backend.NewScript(`-- KEYS: none. ARGV: channel, payload. Reply: receivers.
return redis.call('PUBLISH', ARGV[1], ARGV[2])`)

func woken(w *hub.Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestTargetedAndBroadcastWakeUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		h := hub.New(b, nil)
		ctx := context.Background()
		if h.Joined("base", "x") != nil {
			t.Fatal("Joined before any subscription returned a waiter")
		}
		a, err := h.Join(ctx, "base", "a")
		if err != nil {
			t.Fatal(err)
		}
		defer a.Leave()
		c := h.Joined("base", "c") // already subscribed: no I/O
		if c == nil {
			t.Fatal("Joined on a subscribed channel returned nil")
		}
		defer c.Leave()
		hubID, id, ok := strings.Cut(a.Address(), "/")
		if !ok || id != "a" || !strings.HasPrefix(c.Address(), hubID+"/") {
			t.Fatalf("addresses %q and %q", a.Address(), c.Address())
		}

		// A wake-up for a reaches a only.
		n, err := b.Eval(ctx, publish, nil, "base/"+hubID, "a")
		if err != nil || n != int64(1) {
			t.Fatalf("publish: %v receivers, %v", n, err)
		}
		synctest.Wait()
		if !woken(a) || woken(c) {
			t.Fatal("targeted wake-up did not reach exactly its waiter")
		}
		// A wake-up for an id not here wakes nobody; WakeAll wakes all.
		b.Eval(ctx, publish, nil, "base/"+hubID, "elsewhere")
		synctest.Wait()
		if woken(a) || woken(c) {
			t.Fatal("wake-up for another waiter woke one here")
		}
		b.Eval(ctx, publish, nil, "base/"+hubID, hub.WakeAll)
		synctest.Wait()
		if !woken(a) || !woken(c) {
			t.Fatal("WakeAll did not wake every waiter")
		}
		// Wake-ups are kept until taken: none is lost between attempts.
		b.Eval(ctx, publish, nil, "base/"+hubID, "c")
		b.Eval(ctx, publish, nil, "base/"+hubID, "c")
		synctest.Wait()
		if !woken(c) || woken(c) {
			t.Fatal("want exactly one kept wake-up")
		}
		// A hand-off wakes its waiter and carries the grant, which a
		// plain wake-up after it does not hide; it is taken once.
		b.Eval(ctx, publish, nil, "base/"+hubID, "a 1234")
		b.Eval(ctx, publish, nil, "base/"+hubID, "a")
		synctest.Wait()
		if !woken(a) || woken(c) {
			t.Fatal("hand-off did not wake exactly its waiter")
		}
		if g := a.Grant(); g != "1234" {
			t.Fatalf("Grant() = %q, want 1234", g)
		}
		if g := a.Grant(); g != "" {
			t.Fatalf("second Grant() = %q, want none", g)
		}
		if g := c.Grant(); g != "" {
			t.Fatalf("Grant() of another waiter = %q, want none", g)
		}
	})
}

func TestLingerThenRetire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		h := hub.New(b, nil)
		w, err := h.Join(context.Background(), "base", "a")
		if err != nil {
			t.Fatal(err)
		}
		w.Leave()
		if h.Topics() != 1 {
			t.Fatal("channel not kept subscribed after its last waiter left")
		}
		again := h.Joined("base", "b") // reuses the lingering subscription
		if again == nil {
			t.Fatal("lingering subscription not reused")
		}
		again.Leave()
		time.Sleep(hub.Linger + time.Millisecond)
		synctest.Wait()
		if n := h.Topics(); n != 0 {
			t.Fatalf("%d channels still subscribed after lingering", n)
		}
	})
}
