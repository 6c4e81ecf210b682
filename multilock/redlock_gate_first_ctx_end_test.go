package multilock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/multilock"
)

// memLock is an in-process lock that is not one of dsync's: its
// TryLockContext, having no I/O to bound, does not look at ctx, as a lock
// over a local mutex would not. It has no Name, so a group orders it by
// position. aborted, if set, runs when a LockContext gives up at ctx's end.
type memLock struct {
	mu      sync.Mutex
	owner   string
	changed chan struct{} // closed and replaced at each release
	aborted func()
	stalls  bool // TryLockContext answers only at ctx's end, as a stalled server
}

func newMemLock() *memLock { return &memLock{changed: make(chan struct{})} }

func (m *memLock) TryLockContext(ctx context.Context) (bool, error) {
	if m.stalls {
		<-ctx.Done()
		if m.aborted != nil {
			m.aborted()
		}
		return false, ctx.Err()
	}
	o, _ := dsync.OwnerFrom(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owner == "" || m.owner == o {
		m.owner = o
		return true, nil
	}
	return false, nil
}

func (m *memLock) LockContext(ctx context.Context) error {
	for {
		m.mu.Lock()
		c := m.changed
		m.mu.Unlock()
		if ok, _ := m.TryLockContext(ctx); ok {
			return nil
		}
		select {
		case <-c:
		case <-ctx.Done():
			if m.aborted != nil {
				m.aborted()
			}
			return ctx.Err()
		}
	}
}

func (m *memLock) UnlockContext(ctx context.Context) error {
	o, _ := dsync.OwnerFrom(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owner != o {
		return dsync.ErrNotHeld
	}
	m.owner = ""
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

func (m *memLock) Lock()   { _ = m.LockContext(dsync.WithOwner(context.Background())) }
func (m *memLock) Unlock() {}

func (m *memLock) heldBy() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner
}

// contendedRig is the setup of the tests below: a RedLock over members
// a, b, c, of which owner Y holds b and c, and a round of the group that
// found them busy, so that the group has seen contention.
type contendedRig struct {
	l       *multilock.Lock
	a, b, c *memLock
	y       context.Context
}

func newContendedRig(t *testing.T) *contendedRig {
	r := &contendedRig{a: newMemLock(), b: newMemLock(), c: newMemLock(), y: dsync.WithOwner(context.Background())}
	r.l = multilock.RedLock(r.a, r.b, r.c)
	for _, m := range []*memLock{r.b, r.c} {
		if ok, _ := m.TryLockContext(r.y); !ok {
			t.Fatal("Y could not take its members")
		}
	}
	if ok, err := r.l.TryLockContext(dsync.WithOwner(context.Background())); ok || err != nil {
		t.Fatalf("TryLockContext with 2 of 3 held elsewhere = %v, %v; want false", ok, err)
	}
	return r
}

// freeOnAbort makes Y let b and c go, once, when an attempt on m gives up
// at its ctx's end.
func (r *contendedRig) freeOnAbort(m *memLock) {
	var once sync.Once
	m.aborted = func() {
		once.Do(func() {
			_ = r.b.UnlockContext(r.y)
			_ = r.c.UnlockContext(r.y)
		})
	}
}

// lockFailsAtCtxEnd checks that a LockContext whose ctx ends after 50ms
// fails with ctx's error and leaves no member held.
func (r *contendedRig) lockFailsAtCtxEnd(t *testing.T) {
	t.Helper()
	n := dsync.WithOwner(context.Background())
	ctx, cancel := context.WithTimeout(n, 50*time.Millisecond)
	defer cancel()
	err := r.l.LockContext(ctx)
	if err == nil {
		_ = r.l.UnlockContext(n)
		t.Fatalf("LockContext returned a hold after its ctx ended (%v); want an error matching it", ctx.Err())
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext = %v; want an error matching context.DeadlineExceeded", err)
	}
	for i, m := range []*memLock{r.a, r.b, r.c} {
		if m.heldBy() != "" {
			t.Errorf("member %c left held after the failed LockContext", 'a'+i)
		}
	}
}

// A RedLock's LockContext whose ctx ends while it queues for its gate
// (the first member, once the lock has been contended) fails with ctx's
// error, as it does when ctx ends during any other wait: it makes no
// round of attempts after ctx is done, which with members that do not
// look at ctx could return a hold after the caller gave up. Over members
// a, b, c: Y holds b and c, the group has seen contention, and N, holding
// a, waits for b until its ctx ends, when Y lets b and c go.
func TestRedLockGateFirstStopsAtCtxEnd(t *testing.T) {
	r := newContendedRig(t)
	r.freeOnAbort(r.b)
	r.lockFailsAtCtxEnd(t)
}

// The same when ctx ends during the gate's first attempt (its server
// stalls): the acquisition fails with ctx's error, and makes no attempt
// on the others after it. Y holds b and c, and lets them go when the
// attempt on a gives up.
func TestRedLockGateFirstStopsAtCtxEndOfAStalledGate(t *testing.T) {
	r := newContendedRig(t)
	r.a.stalls = true
	r.freeOnAbort(r.a)
	r.lockFailsAtCtxEnd(t)
}
