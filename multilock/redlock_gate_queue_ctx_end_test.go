package multilock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
)

// A RedLock that queues for its gate in one call (the gate's server
// answered last time) and whose ctx ends during that wait fails with
// ctx's error and leaves nothing held, as when it tried the gate first:
// no round after ctx's end, even if the gate comes free as the wait gives
// up (y lets a go then).
func TestRedLockQueuedGateStopsAtCtxEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t)
		_, _, n1 := r.lockBehindY(t) // the gate answered
		if err := r.l.UnlockContext(n1); err != nil {
			t.Fatal(err)
		}
		if ok, _ := r.a.memLock.TryLockContext(r.y); !ok {
			t.Fatal("y could not take a again")
		}
		r.a.aborted = func() { _ = r.a.memLock.UnlockContext(r.y) }
		defer func() { r.a.aborted = nil }()

		n2 := dsync.WithOwner(context.Background())
		ctx, cancel := context.WithTimeout(n2, 50*time.Millisecond)
		defer cancel()
		err := r.l.LockContext(ctx)
		if err == nil {
			_ = r.l.UnlockContext(n2)
			t.Fatal("LockContext returned a hold after its ctx ended; want an error matching it")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("LockContext = %v; want an error matching context.DeadlineExceeded", err)
		}
		if tries, locks := r.a.calls(); tries != 0 || locks != 1 {
			t.Fatalf("%d tries and %d locks on the gate; want 0 and 1 (queued in one call)", tries, locks)
		}
		for i, m := range []*memLock{r.a.memLock, r.b, r.c} {
			if o := m.heldBy(); o != "" {
				t.Errorf("member %c held after the failed LockContext", 'a'+i)
			}
		}
	})
}
