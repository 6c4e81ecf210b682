package multilock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/multilock"
)

// countedLock counts the calls that a group makes on its member.
type countedLock struct {
	*memLock
	tries, locks atomic.Int32
	waiting      chan struct{} // if set, told when a LockContext begins
}

func (c *countedLock) TryLockContext(ctx context.Context) (bool, error) {
	c.tries.Add(1)
	return c.memLock.TryLockContext(ctx)
}

func (c *countedLock) LockContext(ctx context.Context) error {
	c.locks.Add(1)
	if c.waiting != nil {
		c.waiting <- struct{}{}
	}
	return c.memLock.LockContext(ctx)
}

// calls returns the tries and the locks counted since the last call.
func (c *countedLock) calls() (tries, locks int32) {
	return c.tries.Swap(0), c.locks.Swap(0)
}

// gateRig is a RedLock over a (the gate, counted), b and c, which has
// seen contention: a round found a and b held by y. y then let b go, and
// holds a.
type gateRig struct {
	l    *multilock.Lock
	a    *countedLock
	b, c *memLock
	y    context.Context
}

func newGateRig(t *testing.T) *gateRig {
	r := &gateRig{a: &countedLock{memLock: newMemLock()}, b: newMemLock(), c: newMemLock(), y: dsync.WithOwner(context.Background())}
	r.l = multilock.RedLock(r.a, r.b, r.c)
	for _, m := range []*memLock{r.a.memLock, r.b} {
		if ok, _ := m.TryLockContext(r.y); !ok {
			t.Fatal("y could not take its members")
		}
	}
	if ok, err := r.l.TryLockContext(dsync.WithOwner(context.Background())); ok || err != nil {
		t.Fatalf("TryLockContext with 2 of 3 held elsewhere = %v, %v; want false", ok, err)
	}
	if err := r.b.UnlockContext(r.y); err != nil {
		t.Fatal(err)
	}
	r.a.calls()
	return r
}

// stallAfterAnswer leaves the group contended, with the gate answering
// when it was last tried, then held by y, its server stalling (see
// stallHeldGate).
func (r *gateRig) stallAfterAnswer(t *testing.T) {
	t.Helper()
	_, _, n1 := r.lockBehindY(t) // the gate answered
	if err := r.l.UnlockContext(n1); err != nil {
		t.Fatal(err)
	}
	r.stallHeldGate(t)
}

// stallHeldGate has y take the gate, a, and a round of the group find a
// and b held elsewhere (the group contended), then makes a's server stall
// from now on (until t ends); the calls counted on a start from zero.
func (r *gateRig) stallHeldGate(t *testing.T) {
	t.Helper()
	r.a.stalls = false
	if ok, _ := r.a.memLock.TryLockContext(r.y); !ok {
		t.Fatal("y could not take a")
	}
	// b busy keeps the group contended.
	z := dsync.WithOwner(context.Background())
	if ok, _ := r.b.TryLockContext(z); !ok {
		t.Fatal("z could not take b")
	}
	if ok, err := r.l.TryLockContext(dsync.WithOwner(context.Background())); ok || err != nil {
		t.Fatalf("TryLockContext with a and b held elsewhere = %v, %v; want false", ok, err)
	}
	if err := r.b.UnlockContext(z); err != nil {
		t.Fatal(err)
	}
	r.a.calls()
	r.a.stalls = true
	t.Cleanup(func() { r.a.stalls = false })
}

// lockBehindY locks the group for a new owner while y holds a, lets a go
// 10ms after the group began to wait for it, and returns the calls the acquisition made
// on a, and its owner's context to unlock with.
func (r *gateRig) lockBehindY(t *testing.T) (tries, locks int32, owner context.Context) {
	t.Helper()
	owner = dsync.WithOwner(context.Background())
	r.a.waiting = make(chan struct{}, 1)
	var wg sync.WaitGroup
	var err error
	wg.Go(func() { err = r.l.LockContext(owner) })
	<-r.a.waiting
	r.a.waiting = nil
	time.Sleep(10 * time.Millisecond) // y's hold goes on (the bubble's clock)
	if e := r.a.memLock.UnlockContext(r.y); e != nil {
		t.Fatal(e)
	}
	wg.Wait()
	if err != nil {
		t.Fatalf("LockContext behind y: %v", err)
	}
	tries, locks = r.a.calls()
	return tries, locks, owner
}

// A contended RedLock whose gate's server answered its last attempt
// queues for the gate in one call: it no longer tries it first, which
// cost the server a second call per acquisition. Once nothing is in the
// way it goes back to trying every member at once.
func TestRedLockQueuesForAnsweringGateInOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t)

		// The first acquisition after contention tries the gate first.
		tries, locks, n1 := r.lockBehindY(t)
		if tries != 1 || locks != 1 {
			t.Fatalf("first contended acquisition: %d tries and %d locks on the gate; want 1 and 1", tries, locks)
		}
		if err := r.l.UnlockContext(n1); err != nil {
			t.Fatal(err)
		}

		// y takes the gate again: the next acquisition queues at once.
		if ok, _ := r.a.memLock.TryLockContext(r.y); !ok {
			t.Fatal("y could not take a again")
		}
		tries, locks, n2 := r.lockBehindY(t)
		if tries != 0 || locks != 1 {
			t.Fatalf("contended acquisition with the gate answering: %d tries and %d locks on the gate; want 0 and 1", tries, locks)
		}
		if err := r.l.UnlockContext(n2); err != nil {
			t.Fatal(err)
		}

		// Nothing in the way: queued at once, it found the gate free, and
		// the acquisition after goes back to trying all at once.
		for i, want := range [][2]int32{{0, 1}, {1, 0}} {
			n := dsync.WithOwner(context.Background())
			if err := r.l.LockContext(n); err != nil {
				t.Fatal(err)
			}
			if tries, locks := r.a.calls(); tries != want[0] || locks != want[1] {
				t.Fatalf("uncontended acquisition %d: %d tries and %d locks on the gate; want %d and %d", i+1, tries, locks, want[0], want[1])
			}
			if err := r.l.UnlockContext(n); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A gate whose server stalls after it answered costs the acquisition
// that queues for it the wait's bound, no more: the group wins without
// it, and its next acquisition tries the gate first again, bounded by
// the member timeout, rather than wait for it once more.
func TestRedLockStalledGateIsTriedFirstAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t)
		r.stallAfterAnswer(t)

		n2 := dsync.WithOwner(context.Background())
		if err := r.l.LockContext(n2); err != nil {
			t.Fatalf("LockContext with the gate stalled: %v; want a hold of b and c", err)
		}
		if r.b.heldBy() == "" || r.c.heldBy() == "" {
			t.Fatal("the group's hold does not hold b and c")
		}
		if _, locks := r.a.calls(); locks != 1 {
			t.Fatalf("%d waits for the stalled gate; want 1", locks)
		}
		if err := r.l.UnlockContext(n2); err != nil {
			t.Fatal(err)
		}

		n3 := dsync.WithOwner(context.Background())
		if err := r.l.LockContext(n3); err != nil {
			t.Fatalf("second LockContext with the gate stalled: %v", err)
		}
		if tries, locks := r.a.calls(); locks != 0 || tries == 0 {
			t.Fatalf("the acquisition after the stalled gate's wait: %d tries and %d waits on the gate; want tries only", tries, locks)
		}
		if err := r.l.UnlockContext(n3); err != nil {
			t.Fatal(err)
		}
	})
}
