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

// A RedLock's LockContext whose ctx ends while it queues for its gate
// (the first member, once the lock has been contended) fails with ctx's
// error, as it does when ctx ends during any other wait: it makes no
// round of attempts after ctx is done, which with members that do not
// look at ctx could return a hold after the caller gave up. Over members
// a, b, c: Y holds b and c, the group has seen contention, and N, holding
// a, waits for b until its ctx ends, when Y lets b and c go.
func TestRedLockGateFirstStopsAtCtxEnd(t *testing.T) {
	a, b, c := newMemLock(), newMemLock(), newMemLock()
	l := multilock.RedLock(a, b, c)
	y := dsync.WithOwner(context.Background())
	for _, m := range []*memLock{b, c} {
		if ok, _ := m.TryLockContext(y); !ok {
			t.Fatal("Y could not take its members")
		}
	}
	// A round that finds b and c busy: the group is contended.
	if ok, err := l.TryLockContext(dsync.WithOwner(context.Background())); ok || err != nil {
		t.Fatalf("TryLockContext with 2 of 3 held elsewhere = %v, %v; want false", ok, err)
	}
	var once sync.Once
	b.aborted = func() {
		once.Do(func() {
			_ = b.UnlockContext(y)
			_ = c.UnlockContext(y)
		})
	}
	n := dsync.WithOwner(context.Background())
	ctx, cancel := context.WithTimeout(n, 50*time.Millisecond)
	defer cancel()
	err := l.LockContext(ctx)
	if err == nil {
		_ = l.UnlockContext(n)
		t.Fatalf("LockContext returned a hold after its ctx ended (%v); want an error matching it", ctx.Err())
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext = %v; want an error matching context.DeadlineExceeded", err)
	}
	for i, m := range []*memLock{a, b, c} {
		if o := m.heldBy(); o != "" {
			t.Errorf("member %d left held after the failed LockContext", i)
		}
	}
}

// The same when ctx ends during the gate's first attempt (its server
// stalls): the acquisition fails with ctx's error, and makes no attempt
// on the others after it. Y holds b and c, and lets them go when the
// attempt on a gives up.
func TestRedLockGateFirstStopsAtCtxEndOfAStalledGate(t *testing.T) {
	a, b, c := newMemLock(), newMemLock(), newMemLock()
	l := multilock.RedLock(a, b, c)
	y := dsync.WithOwner(context.Background())
	for _, m := range []*memLock{b, c} {
		if ok, _ := m.TryLockContext(y); !ok {
			t.Fatal("Y could not take its members")
		}
	}
	if ok, err := l.TryLockContext(dsync.WithOwner(context.Background())); ok || err != nil {
		t.Fatalf("TryLockContext with 2 of 3 held elsewhere = %v, %v; want false", ok, err)
	}
	var once sync.Once
	a.stalls = true
	a.aborted = func() {
		once.Do(func() {
			_ = b.UnlockContext(y)
			_ = c.UnlockContext(y)
		})
	}
	n := dsync.WithOwner(context.Background())
	ctx, cancel := context.WithTimeout(n, 50*time.Millisecond)
	defer cancel()
	err := l.LockContext(ctx)
	if err == nil {
		_ = l.UnlockContext(n)
		t.Fatalf("LockContext returned a hold after its ctx ended (%v); want an error matching it", ctx.Err())
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext = %v; want an error matching context.DeadlineExceeded", err)
	}
	for i, m := range []*memLock{b, c} {
		if o := m.heldBy(); o != "" {
			t.Errorf("member %d left held after the failed LockContext", i+1)
		}
	}
}
