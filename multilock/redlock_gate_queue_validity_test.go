package multilock_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/multilock"
)

// lateLock is a memLock whose LockContext, once it has taken the lock,
// answers late: the reply of a server slow to answer, whose hold (and
// lease) began when it took the lock, not when its caller heard of it. It
// records when each acquisition took the lock.
type lateLock struct {
	*memLock
	late time.Duration

	tmu   sync.Mutex
	taken time.Time
}

func (l *lateLock) took() {
	l.tmu.Lock()
	l.taken = time.Now()
	l.tmu.Unlock()
}

func (l *lateLock) takenAt() time.Time {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	return l.taken
}

func (l *lateLock) TryLockContext(ctx context.Context) (bool, error) {
	ok, err := l.memLock.TryLockContext(ctx)
	if ok {
		l.took()
	}
	return ok, err
}

func (l *lateLock) LockContext(ctx context.Context) error {
	if err := l.memLock.LockContext(ctx); err != nil {
		return err
	}
	l.took()
	time.Sleep(l.late) // the reply's delay (the bubble's clock)
	return nil
}

// A RedLock's validity is counted from the first request of the round
// that won, or, for a round that waited for a member, from when that
// member was acquired. A contended RedLock whose gate answered last time
// queues for it in one call; when the gate is free, that call is the
// round's first request, and the gate's lease runs from it, however late
// its reply. A round that counted its validity from the reply instead
// would return a majority whose oldest member's lease has run out.
// Over a (the gate, answering 150ms late), b and c, with a 100ms lease:
// z holds c, so the majority is a and b.
func TestRedLockGateQueuedInOneCallCountsValidityFromItsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 100 * time.Millisecond
		a, b, c := &lateLock{memLock: newMemLock()}, &lateLock{memLock: newMemLock()}, &lateLock{memLock: newMemLock()}
		l := multilock.NewRedLock([]dsync.Locker{a, b, c}, multilock.WithLease(lease))
		bg := context.Background()

		// Contention: y holds a and b, and a try of the group fails.
		y := dsync.WithOwner(bg)
		for _, m := range []*lateLock{a, b} {
			if ok, _ := m.TryLockContext(y); !ok {
				t.Fatal("y could not take its members")
			}
		}
		if ok, err := l.TryLockContext(dsync.WithOwner(bg)); ok || err != nil {
			t.Fatalf("TryLockContext with 2 of 3 held elsewhere = %v, %v; want false", ok, err)
		}
		if err := b.UnlockContext(y); err != nil {
			t.Fatal(err)
		}
		// The next acquisition tries a, its server answers, and it waits
		// for a until y lets it go: the gate answered.
		n1 := dsync.WithOwner(bg)
		done := make(chan error, 1)
		go func() { done <- l.LockContext(n1) }()
		synctest.Wait()
		if err := a.UnlockContext(y); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("LockContext behind y: %v", err)
		}
		if err := l.UnlockContext(n1); err != nil {
			t.Fatal(err)
		}

		// z holds c; a answers 150ms late, past the lease.
		z := dsync.WithOwner(bg)
		if ok, _ := c.TryLockContext(z); !ok {
			t.Fatal("z could not take c")
		}
		a.late = 150 * time.Millisecond
		n2 := dsync.WithOwner(bg)
		ctx, cancel := context.WithTimeout(n2, 10*time.Second)
		defer cancel()
		if err := l.LockContext(ctx); err != nil {
			t.Fatalf("LockContext: %v", err)
		}
		now := time.Now()
		drift := time.Duration(float64(lease)*multilock.DefaultDriftFactor) + 2*time.Millisecond
		valid := 0
		var ages []time.Duration
		for _, m := range []*lateLock{a, b, c} {
			if o, _ := dsync.OwnerFrom(n2); m.heldBy() != o {
				continue
			}
			age := now.Sub(m.takenAt())
			ages = append(ages, age)
			if age < lease-drift {
				valid++
			}
		}
		if valid < 2 {
			t.Errorf("LockContext returned a hold of %d members, taken %v before it returned, of which %d within the %v lease less drift; want a majority (2) within it", len(ages), ages, valid, lease)
		}
		if err := l.UnlockContext(n2); err != nil {
			t.Fatal(err)
		}
		if err := c.UnlockContext(z); err != nil {
			t.Fatal(err)
		}
	})
}
