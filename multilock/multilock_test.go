package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// servers starts n private redis-server processes for t.
func servers(t *testing.T, n int) []*harness.Server {
	t.Helper()
	s := make([]*harness.Server, n)
	var wg sync.WaitGroup
	for i := range s {
		wg.Add(1)
		go func() { defer wg.Done(); s[i] = harness.Standalone(t) }()
	}
	wg.Wait()
	for _, srv := range s {
		if srv == nil {
			t.FailNow()
		}
	}
	return s
}

// newBackend returns a backend of its own on addr, as a separate process
// would have, closed when t ends.
func newBackend(t *testing.T, addr string) backend.Backend {
	t.Helper()
	pool := &redis.Pool{
		MaxIdle: 16,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr, redis.DialConnectTimeout(200*time.Millisecond))
		},
	}
	b := bredigo.New(pool)
	t.Cleanup(func() { b.Close(); pool.Close() })
	return b
}

func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// free reports whether another owner can take m at once (and releases it).
func free(t *testing.T, m dsync.Locker) bool {
	t.Helper()
	ctx := dsync.WithOwner(deadline(t, 5*time.Second))
	ok, err := m.TryLockContext(ctx)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if ok {
		if err := m.UnlockContext(ctx); err != nil {
			t.Fatalf("probe unlock: %v", err)
		}
	}
	return ok
}

func TestBadInput(t *testing.T) {
	m := mutex.New(nil, "x") // never used: the errors come before any I/O
	var nilMutex *mutex.Mutex
	cases := map[string]*multilock.Lock{
		"all none":         multilock.All(),
		"all nil":          multilock.All(m, nil),
		"all typed nil":    multilock.All(m, nilMutex),
		"all twice":        multilock.All(m, mutex.New(nil, "y"), m),
		"redlock none":     multilock.RedLock(),
		"redlock nil":      multilock.RedLock(nil),
		"redlock twice":    multilock.RedLock(m, m),
		"redlock drift":    multilock.NewRedLock([]dsync.Locker{m}, multilock.WithDriftFactor(0.5)),
		"redlock lease":    multilock.NewRedLock([]dsync.Locker{m}, multilock.WithLease(0)),
		"redlock negdrift": multilock.NewRedLock([]dsync.Locker{m}, multilock.WithDriftFactor(-1)),
	}
	ctx := dsync.WithOwner(context.Background())
	for name, l := range cases {
		want := dsync.ErrInvalidMembers
		if name == "redlock drift" || name == "redlock lease" || name == "redlock negdrift" {
			want = dsync.ErrInvalidLease
		}
		if err := l.LockContext(ctx); !errors.Is(err, want) {
			t.Errorf("%s: LockContext = %v, want %v", name, err, want)
		}
		if _, err := l.TryLockContext(ctx); !errors.Is(err, want) {
			t.Errorf("%s: TryLockContext = %v, want %v", name, err, want)
		}
		if err := l.UnlockContext(ctx); !errors.Is(err, want) {
			t.Errorf("%s: UnlockContext = %v, want %v", name, err, want)
		}
		if _, err := l.Tokens(ctx); !errors.Is(err, want) {
			t.Errorf("%s: Tokens = %v, want %v", name, err, want)
		}
	}
}

func TestUnlockNotHeld(t *testing.T) {
	s := servers(t, 1)[0]
	b := newBackend(t, s.Addr())
	l := multilock.All(mutex.New(b, t.Name()+"a"), mutex.New(b, t.Name()+"b"))
	ctx := dsync.WithOwner(deadline(t, 5*time.Second))
	if err := l.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Fatalf("UnlockContext without a hold = %v, want ErrNotHeld", err)
	}
	if err := l.UnlockContext(context.Background()); !errors.Is(err, dsync.ErrNotHeld) {
		t.Fatalf("ownerless UnlockContext without a hold = %v, want ErrNotHeld", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Unlock of an unlocked group did not panic")
			}
		}()
		l.Unlock()
	}()
}

// All over 3 members: a conflicting holder of one member blocks the
// group, and the group's other members are free right after the failed
// attempt; once the holder releases, the group gets the lock.
func TestAllConflict(t *testing.T) {
	s := servers(t, 1)[0]
	b1, b2 := newBackend(t, s.Addr()), newBackend(t, s.Addr())
	names := []string{t.Name() + ":a", t.Name() + ":b", t.Name() + ":c"}
	var ms []dsync.Locker
	for _, n := range names {
		ms = append(ms, mutex.New(b1, n))
	}
	l := multilock.All(ms...)

	other := mutex.New(b2, names[1])
	octx := dsync.WithOwner(deadline(t, 10*time.Second))
	if err := other.LockContext(octx); err != nil {
		t.Fatal(err)
	}
	ctx := dsync.WithOwner(deadline(t, 10*time.Second))
	ok, err := l.TryLockContext(ctx)
	if err != nil || ok {
		t.Fatalf("TryLockContext with b held elsewhere = %v, %v; want false", ok, err)
	}
	if !free(t, mutex.New(b2, names[0])) || !free(t, mutex.New(b2, names[2])) {
		t.Fatal("a or c still held after the failed try")
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = l.LockContext(short)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext with b held elsewhere = %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 300*time.Millisecond+time.Second {
		t.Fatalf("LockContext returned %v after a 300ms deadline", el)
	}
	if !free(t, mutex.New(b2, names[0])) || !free(t, mutex.New(b2, names[2])) {
		t.Fatal("a or c still held after the failed lock")
	}

	// A waiting group gets the lock when b is released.
	got := make(chan error, 1)
	go func() { got <- l.LockContext(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("LockContext returned %v while b is held", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := other.UnlockContext(octx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("LockContext after b's release: %v", err)
	}
	for _, n := range names {
		if free(t, mutex.New(b2, n)) {
			t.Fatalf("%s free while the group holds it", n)
		}
	}
	toks, err := l.Tokens(ctx)
	if err != nil || len(toks) != 3 || toks[0] <= 0 || toks[1] <= 0 || toks[2] <= 0 {
		t.Fatalf("Tokens = %v, %v; want 3 positive tokens", toks, err)
	}
	done := l.Done(ctx)
	if err := l.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	for _, n := range names {
		if !free(t, mutex.New(b2, n)) {
			t.Fatalf("%s held after the group's unlock", n)
		}
	}
	if err := l.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Fatalf("second UnlockContext = %v, want ErrNotHeld", err)
	}
}

// Reentrant group holds of one owner, and ownerless Lock/Unlock as
// sync.Locker.
func TestReentrantAndOwnerless(t *testing.T) {
	s := servers(t, 1)[0]
	b := newBackend(t, s.Addr())
	a, c := mutex.New(b, t.Name()+":a"), mutex.New(b, t.Name()+":c")
	l := multilock.All(a, c)
	ctx := dsync.WithOwner(deadline(t, 10*time.Second))
	for range 2 {
		if err := l.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if free(t, a) {
		t.Fatal("a free after one of two unlocks")
	}
	if err := l.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if !free(t, a) || !free(t, c) {
		t.Fatal("members held after the last unlock")
	}

	var mu sync.Locker = l
	mu.Lock()
	if free(t, a) || free(t, c) {
		t.Fatal("members free during an ownerless hold")
	}
	// A second ownerless Lock waits, as sync.Mutex does, until Unlock.
	locked := make(chan struct{})
	go func() { mu.Lock(); close(locked) }()
	select {
	case <-locked:
		t.Fatal("second ownerless Lock did not wait")
	case <-time.After(100 * time.Millisecond):
	}
	mu.Unlock()
	<-locked
	mu.Unlock()
	if !free(t, a) || !free(t, c) {
		t.Fatal("members held after ownerless Unlock")
	}
}

// Two goroutines loop for 3s on All(a,b,c) and All(c,b,a), each with a
// backend of its own: both make progress, and never hold at once.
func TestOverlappingOrders(t *testing.T) {
	s := servers(t, 1)[0]
	names := []string{t.Name() + ":a", t.Name() + ":b", t.Name() + ":c"}
	group := func(order ...int) *multilock.Lock {
		b := newBackend(t, s.Addr())
		var ms []dsync.Locker
		for _, i := range order {
			ms = append(ms, mutex.New(b, names[i]))
		}
		return multilock.All(ms...)
	}
	groups := []*multilock.Lock{group(0, 1, 2), group(2, 1, 0)}
	var inside atomic.Int32
	var counts [2]atomic.Int64
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for g, l := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000 && time.Now().Before(stop); i++ {
				ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 5*time.Second)
				err := l.LockContext(ctx)
				if err != nil {
					cancel()
					errc <- fmt.Errorf("group %d: %w", g, err)
					return
				}
				if inside.Add(1) != 1 {
					errc <- fmt.Errorf("both groups hold the lock")
				}
				counts[g].Add(1)
				inside.Add(-1)
				err = l.UnlockContext(ctx)
				cancel()
				if err != nil {
					errc <- fmt.Errorf("group %d unlock: %w", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	t.Logf("acquisitions in 3s: All(a,b,c) %d, All(c,b,a) %d", counts[0].Load(), counts[1].Load())
	if counts[0].Load() == 0 || counts[1].Load() == 0 {
		t.Fatalf("a group made no progress: %d, %d", counts[0].Load(), counts[1].Load())
	}
}

// Mixed members: a mutex and the write side of an rwlock on two
// backends work as one lock; deleting a member's key closes Done.
func TestMixedMembers(t *testing.T) {
	ss := servers(t, 2)
	b1, b2 := newBackend(t, ss[0].Addr()), newBackend(t, ss[1].Addr())
	m := mutex.New(b1, t.Name(), mutex.WithWatchdog(600*time.Millisecond))
	rw := rwlock.New(b2, t.Name(), rwlock.WithWatchdog(600*time.Millisecond))
	l := multilock.All(m, rw)

	// A reader on the rwlock blocks the group.
	reader := rwlock.New(newBackend(t, ss[1].Addr()), t.Name())
	rctx := dsync.WithOwner(deadline(t, 10*time.Second))
	if err := reader.RLockContext(rctx); err != nil {
		t.Fatal(err)
	}
	ctx := dsync.WithOwner(deadline(t, 10*time.Second))
	if ok, err := l.TryLockContext(ctx); ok || err != nil {
		t.Fatalf("TryLockContext with a reader = %v, %v; want false", ok, err)
	}
	if !free(t, mutex.New(newBackend(t, ss[0].Addr()), t.Name())) {
		t.Fatal("mutex held after the failed try")
	}
	if err := reader.RUnlockContext(rctx); err != nil {
		t.Fatal(err)
	}
	if err := l.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := reader.TryRLockContext(dsync.WithOwner(ctx)); ok || err != nil {
		t.Fatalf("TryRLock during the group's hold = %v, %v", ok, err)
	}
	done := l.Done(ctx)
	select {
	case <-done:
		t.Fatal("Done closed while held")
	default:
	}
	// Delete the mutex's key: the watchdog's next renewal finds it gone.
	if _, err := ss[0].Node().Do(ctx, "FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5s after a member's key was deleted")
	}
	// Unlocking a lost group reports the loss and releases the rest.
	if err := l.UnlockContext(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Fatalf("UnlockContext of a lost group = %v, want ErrNotHeld", err)
	}
	if ok, err := reader.TryRLockContext(rctx); !ok || err != nil {
		t.Fatalf("rwlock not free after the lost group's unlock: %v, %v", ok, err)
	}
	reader.RUnlockContext(rctx)
}

// redlock returns a RedLock over one mutex on each server, each through
// a backend of its own.
func redlock(t *testing.T, ss []*harness.Server, name string, opts ...mutex.Option) (*multilock.Lock, []*mutex.Mutex) {
	var ms []*mutex.Mutex
	var ls []dsync.Locker
	for _, s := range ss {
		m := mutex.New(newBackend(t, s.Addr()), name, opts...)
		ms = append(ms, m)
		ls = append(ls, m)
	}
	return multilock.RedLock(ls...), ms
}

// RedLock over 5 servers: acquires with 2 stopped; with 3 stopped fails
// within ctx's deadline and leaves no member held; usable again once the
// servers are back.
func TestRedLockServersDown(t *testing.T) {
	ss := servers(t, 5)
	l, _ := redlock(t, ss, t.Name())
	_, probe := redlock(t, ss, t.Name())
	ss[0].Node().Kill()
	ss[1].Node().Kill()

	ctx := dsync.WithOwner(deadline(t, 20*time.Second))
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := l.LockContext(lctx); err != nil {
		t.Fatalf("RedLock with 2 of 5 down: %v", err)
	}
	cancel()
	for _, m := range probe[2:] {
		if free(t, m) {
			t.Fatal("a live member is free while RedLock holds it")
		}
	}
	// Another RedLock cannot take it.
	other, _ := redlock(t, ss, t.Name())
	if ok, err := other.TryLockContext(dsync.WithOwner(ctx)); ok || err != nil {
		t.Fatalf("second RedLock's try = %v, %v; want false", ok, err)
	}
	if err := l.UnlockContext(ctx); err != nil {
		t.Fatalf("unlock with 2 down: %v", err)
	}

	ss[2].Node().Kill()
	lctx, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	err := l.LockContext(lctx)
	el := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RedLock with 3 of 5 down = %v, want DeadlineExceeded", err)
	}
	// The deadline, plus a member attempt's bound, plus load.
	if el > 2500*time.Millisecond {
		t.Fatalf("RedLock with 3 down failed after %v, the deadline was 1s", el)
	}
	t.Logf("with 3 of 5 down, LockContext failed after %v (1s deadline): %v", el, err)
	for _, m := range probe[3:] {
		if !free(t, m) {
			t.Fatal("a member left held by the failed RedLock")
		}
	}
	if ok, err := l.TryLockContext(ctx); ok || err == nil {
		t.Fatalf("TryLockContext with 3 down = %v, %v; want an error", ok, err)
	}

	for _, s := range ss[:3] {
		if err := s.Node().Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The backends reconnect on their own; give them the ctx's time.
	if err := l.LockContext(ctx); err != nil {
		t.Fatalf("RedLock after the servers returned: %v", err)
	}
	_, probe = redlock(t, ss, t.Name()) // fresh connections
	n := 0
	for _, m := range probe {
		if !free(t, m) {
			n++
		}
	}
	if n < 3 {
		t.Fatalf("RedLock holds %d members after the servers returned, want at least 3", n)
	}
	if err := l.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// A server restarted without persistence forgets the holds it had: with
// 3 of 5 servers restarted during a hold, another owner forms a majority
// while the first still holds the 2 others, and until the first's
// members find their keys gone (at a renewal, or when their pub/sub
// connection comes back) both believe they hold the lock. The
// group's Done then closes: its quorum is lost. The fencing tokens of the
// second holder are above the first's on the restarted servers (tokens
// need no persistence to grow; see mutex's doc). This is the documented
// limit of RedLock; fencing tokens are the remedy.
func TestRedLockServerRestartedWithoutPersistence(t *testing.T) {
	ss := servers(t, 5)
	// Renewals every 2s: the restarts and b's acquisition take far less.
	wd := mutex.WithWatchdog(6 * time.Second)
	a, _ := redlock(t, ss, t.Name(), wd)
	b, _ := redlock(t, ss, t.Name(), wd)
	actx := dsync.WithOwner(deadline(t, 20*time.Second))
	bctx := dsync.WithOwner(deadline(t, 20*time.Second))
	if ok, err := a.TryLockContext(actx); !ok || err != nil {
		t.Fatalf("first RedLock: %v, %v", ok, err)
	}
	done := a.Done(actx)
	atoks, _ := a.Tokens(actx)

	// One restart: the RedLock still has 4 of 5 and a majority.
	if err := ss[0].Node().Restart(actx); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLockContext(bctx); ok || err != nil {
		t.Fatalf("second RedLock with one server restarted = %v, %v; want false", ok, err)
	}
	for _, s := range ss[1:3] {
		if err := s.Node().Restart(actx); err != nil {
			t.Fatal(err)
		}
	}
	// b's pooled connections to the restarted servers fail once each.
	ok := false
	for i := 0; i < 10 && !ok; i++ {
		var err error
		if ok, err = b.TryLockContext(bctx); err != nil {
			t.Logf("try %d: %v", i, err)
		}
	}
	if !ok {
		t.Fatal("second RedLock did not form a majority on the restarted servers")
	}
	btoks, _ := b.Tokens(bctx)
	t.Logf("tokens of the first holder %v, of the second %v", atoks, btoks)
	select {
	case <-done:
		// The members noticed early: a restart drops their pub/sub
		// connection, and they check their holds on reconnecting.
		t.Log("the first holder's Done closed before the second acquired")
	default:
		t.Log("both RedLocks believe they hold the lock")
	}
	for i := range 3 {
		// A resource that keeps the highest token it saw from each
		// member turns the first holder away.
		if btoks[i] <= atoks[i] {
			t.Errorf("member %d: second holder's token %d is not above the first's %d", i, btoks[i], atoks[i])
		}
	}
	select {
	case <-done:
	case <-time.After(8 * time.Second):
		t.Fatal("first holder's Done not closed 5s after its quorum was lost")
	}
	if err := a.UnlockContext(actx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Fatalf("unlock of the lost RedLock = %v, want ErrNotHeld", err)
	}
	select {
	case <-b.Done(bctx):
		t.Fatal("second holder's Done closed")
	default:
	}
	if err := b.UnlockContext(bctx); err != nil {
		t.Fatal(err)
	}
}

// RedLock's validity: an acquisition slower than lease − drift counts as
// failed and leaves nothing held.
func TestRedLockValidity(t *testing.T) {
	ss := servers(t, 3)
	var ls []dsync.Locker
	var probe []*mutex.Mutex
	for _, s := range ss {
		ls = append(ls, slowLocker{mutex.New(newBackend(t, s.Addr()), t.Name(), mutex.WithLease(time.Second)), 150 * time.Millisecond})
		probe = append(probe, mutex.New(newBackend(t, s.Addr()), t.Name()))
	}
	// A 100ms lease is used up by 150ms attempts.
	l := multilock.NewRedLock(ls, multilock.WithLease(100*time.Millisecond))
	ctx := dsync.WithOwner(deadline(t, 10*time.Second))
	if ok, err := l.TryLockContext(ctx); ok || err != nil {
		t.Fatalf("TryLockContext slower than its validity = %v, %v; want false", ok, err)
	}
	for _, m := range probe {
		if !free(t, m) {
			t.Fatal("a member left held by an acquisition past its validity")
		}
	}
	// With a 1s lease the same acquisition is valid.
	l = multilock.NewRedLock(ls, multilock.WithLease(time.Second))
	if ok, err := l.TryLockContext(ctx); !ok || err != nil {
		t.Fatalf("TryLockContext within its validity = %v, %v; want true", ok, err)
	}
	if err := l.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// slowLocker makes every attempt take at least d.
type slowLocker struct {
	*mutex.Mutex
	d time.Duration
}

func (s slowLocker) TryLockContext(ctx context.Context) (bool, error) {
	ok, err := s.Mutex.TryLockContext(ctx)
	time.Sleep(s.d)
	return ok, err
}

// A waiting RedLock queues for a busy member rather than take a free
// majority from under its waiters, but a member held for long (its holder
// gone, say) does not stop it: after one bounded wait it takes the
// majority without it.
func TestRedLockMemberHeldElsewhere(t *testing.T) {
	ss := servers(t, 3)
	l, _ := redlock(t, ss, t.Name())
	stuck := mutex.New(newBackend(t, ss[0].Addr()), t.Name())
	sctx := dsync.WithOwner(deadline(t, 20*time.Second))
	if err := stuck.LockContext(sctx); err != nil {
		t.Fatal(err)
	}
	ctx := dsync.WithOwner(deadline(t, 10*time.Second))
	if ok, err := l.TryLockContext(ctx); !ok || err != nil {
		t.Fatalf("TryLockContext with 2 of 3 free = %v, %v; want true", ok, err)
	}
	if err := l.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := l.LockContext(ctx); err != nil {
		t.Fatalf("LockContext with 2 of 3 free: %v", err)
	}
	el := time.Since(start)
	t.Logf("LockContext with one member held elsewhere took %v", el)
	if el > 4*time.Second {
		t.Fatalf("LockContext took %v; the wait for the busy member is bounded by 1s", el)
	}
	if err := l.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stuck.UnlockContext(sctx); err != nil {
		t.Fatal(err)
	}
}

// A RedLock's unlock reports a member's loss only when a majority was not
// released: a member lost while a majority remains does not fail it.
func TestRedLockUnlockWithLostMembers(t *testing.T) {
	ss := servers(t, 3)
	l, _ := redlock(t, ss, t.Name())
	ctx := dsync.WithOwner(deadline(t, 10*time.Second))
	for lost := 1; lost <= 2; lost++ {
		if ok, err := l.TryLockContext(ctx); !ok || err != nil {
			t.Fatalf("TryLockContext = %v, %v", ok, err)
		}
		for _, s := range ss[:lost] {
			if _, err := s.Node().Do(ctx, "FLUSHALL"); err != nil {
				t.Fatal(err)
			}
		}
		err := l.UnlockContext(ctx)
		if lost == 1 && err != nil {
			t.Fatalf("unlock with 1 of 3 members lost: %v, want nil", err)
		}
		if lost == 2 && !errors.Is(err, dsync.ErrNotHeld) {
			t.Fatalf("unlock with 2 of 3 members lost: %v, want ErrNotHeld", err)
		}
	}
}
