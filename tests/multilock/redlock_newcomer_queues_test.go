package multilock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// countingMember counts the attempts a group makes on a member.
type countingMember struct {
	*mutex.Mutex
	attempts *atomic.Int32
}

func (c countingMember) LockContext(ctx context.Context) error {
	c.attempts.Add(1)
	return c.Mutex.LockContext(ctx)
}

func (c countingMember) TryLockContext(ctx context.Context) (bool, error) {
	c.attempts.Add(1)
	return c.Mutex.TryLockContext(ctx)
}

// A RedLock that has found its members contended, locking again, queues
// for the first member in order (the gate every waiter queues for) before
// it tries the others: it does not take them from under the waiter its
// own release just handed the gate, which would then wait for them to be
// given back. Over 3 members a, b, c: H's first LockContext finds c held
// elsewhere (so H has seen contention) and gets the group once c is free;
// W then queues for a; H unlocks, which hands a to W, and locks again at
// once. Until W holds the group, H must make no attempt on b or c.
func TestRedLockContendedNewcomerQueuesForTheGateFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := newMembers(t, ctx, "redlock-newcomer")
	var attempts [3]atomic.Int32
	var ms []dsync.Locker
	for i := range 3 {
		ms = append(ms, countingMember{m.handle(i), &attempts[i]})
	}
	hl := multilock.RedLock(ms...)
	h := dsync.WithOwner(ctx)

	freeC := m.hold(2)
	got := make(chan error, 1)
	go func() { got <- hl.LockContext(h) }()
	m.awaitWaiters(2, 1)
	freeC()
	if err := within(t, got, 5*time.Second, "H's first LockContext"); err != nil {
		t.Fatal(err)
	}

	wl := m.redlock(3)
	w := dsync.WithOwner(ctx)
	wGot := make(chan error, 1)
	go func() { wGot <- wl.LockContext(w) }()
	m.awaitWaiters(0, 1)

	if err := hl.UnlockContext(h); err != nil {
		t.Fatal(err)
	}
	before := attempts[1].Load() + attempts[2].Load()
	hGot := make(chan error, 1)
	go func() { hGot <- hl.LockContext(h) }()
	if err := within(t, wGot, 5*time.Second, "W's LockContext after H's unlock"); err != nil {
		t.Fatal(err)
	}
	if n := attempts[1].Load() + attempts[2].Load() - before; n != 0 {
		t.Errorf("H, locking again, made %d attempts on b and c before W, handed a, held the group; want none: it queues for a first", n)
	}
	select {
	case err := <-hGot:
		t.Fatalf("H's second LockContext returned %v while W held the group", err)
	default:
	}
	if err := wl.UnlockContext(w); err != nil {
		t.Fatal(err)
	}
	if err := within(t, hGot, 5*time.Second, "H's second LockContext after W's unlock"); err != nil {
		t.Fatal(err)
	}
	if err := hl.UnlockContext(h); err != nil {
		t.Fatal(err)
	}
}

// within returns what c delivers, failing t if nothing comes within d.
func within(t *testing.T, c <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(d):
		t.Fatalf("%s: nothing within %v", what, d)
		return nil
	}
}
