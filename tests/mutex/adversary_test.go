package mutex_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Adversarial tests: each fails on ed32bcc for the defect named above it.

// advFlaky fails every script call with a connection error (transient)
// while fail is set, without reaching the server, as a cut network would.
// failNext fails only the next call.
type advFlaky struct {
	backend.Backend
	fail     atomic.Bool
	failNext atomic.Bool
}

var errAdvNet = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: connection reset by peer")

func (f *advFlaky) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if f.fail.Load() || f.failNext.CompareAndSwap(true, false) {
		return nil, errAdvNet
	}
	return f.Backend.Eval(ctx, s, keys, args...)
}

// ---------------------------------------------------------------------------

// TestAdvReentryShorterLeaseClientOutlivesServer: a re-entry through a
// handle whose lease is shorter than the remaining expiry on the server
// leaves the server's expiry alone (store_extending), but the client's
// lease is extended by its own, longer TTL from the re-entry (Lease.Extend).
// When renewals then fail, Done fires up to a renewal interval after the
// server expired the key: another owner holds the mutex while the first
// still has no lost signal (the lease package promises the client gives
// up no later than the server).
func TestAdvReentryShorterLeaseClientOutlivesServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		fb := &advFlaky{Backend: fake.FakeBackend(t, srv)}
		const name = "advreentry"
		o := dsync.WithOwner(context.Background())
		long := mutex.New(fb, name, mutex.WithLogger(nil))                                // 30s watchdog
		short := mutex.New(fb, name, mutex.WithLease(time.Second), mutex.WithLogger(nil)) // 1s fixed
		if err := long.LockContext(o); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		done := long.Done(o)
		time.Sleep(9 * time.Second) // just before the first renewal
		if err := short.LockContext(o); err != nil {
			t.Fatal(err) // re-entry: the server keeps its expiry (21s left)
		}
		fb.fail.Store(true) // from now on every renewal fails

		other := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		for {
			ok, err := other.TryLockContext(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if time.Since(start) > time.Minute {
				t.Fatal("the hold never expired on the server")
			}
			time.Sleep(100 * time.Millisecond)
		}
		took := time.Since(start)
		select {
		case <-done:
		default:
			var lost time.Duration
			select {
			case <-done:
			case <-time.After(time.Minute):
			}
			lost = time.Since(start)
			t.Errorf("another owner acquired the mutex %v after the first owner's hold started, but the first owner's Done fired only at %v: both held it for %v",
				took, lost, lost-took)
		}
		other.Unlock()
		fb.fail.Store(false)
		time.Sleep(2 * time.Minute)
	})
}

// ---------------------------------------------------------------------------

// TestAdvRenewalIgnoresHoldID: the batched renewal (renew_holds) checks only
// the owner at the lock key, not the hold id. Owner o holds A through one
// backend value; A is force-unlocked and another owner holds and releases
// the mutex; o then locks again through a second backend value of the same
// process (a new hold B). The first lease's renewals find "o" at the key
// and renew B as if it were A: the loss of A, during which another owner
// held the mutex, is never signalled on A's Done, and its Token stays A's.
func TestAdvRenewalIgnoresHoldID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advholdid"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		x := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		doneA := m1.Done(o)
		tokA, _ := m1.Token(o)
		if ok, err := x.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		x.Lock() // another owner holds the mutex: o's hold A is over
		tokX, _ := x.Token(ctx)
		x.Unlock()
		if err := m2.LockContext(o); err != nil { // a new hold B for o
			t.Fatal(err)
		}
		tokB, _ := m2.Token(o)
		// Three renewal intervals of A's lease.
		time.Sleep(31 * time.Second)
		select {
		case <-doneA:
		default:
			tok, err := m1.Token(o)
			t.Errorf("hold A (token %d) was force-unlocked and another owner held the mutex (token %d) before o took hold B (token %d); 31s later A's Done is still open and m1.Token(o) = %d, %v: A's renewals renewed B",
				tokA, tokX, tokB, tok, err)
		}
		m2.UnlockContext(o)
		m1.UnlockContext(o)
		time.Sleep(time.Minute)
	})
}

// ---------------------------------------------------------------------------

// TestAdvTokenDoneFromOtherServer: two independent servers with the same
// mutex name and the same owner (a RedLock over two servers). Token and
// Done on a handle of server 2, where the owner holds nothing (or lost its
// hold), answer with the owner's hold on server 1: a token and an open
// Done for a hold that does not exist on that server.
func TestAdvTokenDoneFromOtherServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv1, srv2 := fake.Fake(t), fake.Fake(t)
		ctx := context.Background()
		const name = "advtwoservers"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv1), name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv2), name, mutex.WithLogger(nil))
		x2 := mutex.New(fake.FakeBackend(t, srv2), name, mutex.WithLogger(nil))

		// Server 2 is held by someone else: o gets server 1 only.
		x2.Lock()
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if ok, err := m2.TryLockContext(o); ok || err != nil {
			t.Fatalf("TryLock on server 2, held by another owner = %v, %v", ok, err)
		}
		if tok, err := m2.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("server 2: Token(o) = %d, %v; want ErrNotHeld: o holds nothing on server 2 (its hold is on server 1)", tok, err)
		}
		select {
		case <-m2.Done(o):
		default:
			t.Errorf("server 2: Done(o) is open though o holds nothing on server 2")
		}
		x2.Unlock()

		// o takes server 2 as well, then loses it (the server's data is lost).
		if err := m2.LockContext(o); err != nil {
			t.Fatal(err)
		}
		done2 := m2.Done(o)
		srv2.FlushAll()
		select {
		case <-done2:
		case <-time.After(11 * time.Second): // one renewal interval
			t.Fatal("server 2's hold lost: not signalled")
		}
		if tok, err := m2.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("server 2 after its hold was lost: Token(o) = %d, %v; want ErrNotHeld", tok, err)
		}
		select {
		case <-m2.Done(o):
		default:
			t.Errorf("server 2 after its hold was lost: a fresh Done(o) is open (it is server 1's hold)")
		}
		m1.UnlockContext(o)
		time.Sleep(time.Minute)
	})
}

// ---------------------------------------------------------------------------

// TestAdvAmbiguousReleaseOnOtherServer: owner o holds the mutex on server
// 1 only and calls UnlockContext through a handle on server 2. The first
// release attempt fails with a connection error (the script did not run);
// the retry finds nothing of o's on server 2 (-1). Core.Release takes the
// -1 after an ambiguous attempt as "an earlier attempt released the last
// hold" and applies it to the lease it was given, which is server 1's:
// UnlockContext returns nil, server 1's lease ends (renewals stop, Done
// closes), yet server 1 still holds the mutex, and o can no longer
// release it.
func TestAdvAmbiguousReleaseOnOtherServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv1, srv2 := fake.Fake(t), fake.Fake(t)
		ctx := context.Background()
		const name = "advambiguous"
		o := dsync.WithOwner(ctx)
		m1 := mutex.New(fake.FakeBackend(t, srv1), name, mutex.WithLogger(nil))
		fb2 := &advFlaky{Backend: fake.FakeBackend(t, srv2)}
		m2 := mutex.New(fb2, name, mutex.WithLogger(nil))
		probe1 := mutex.New(fake.FakeBackend(t, srv1), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		done1 := m1.Done(o)
		fb2.failNext.Store(true)
		err := m2.UnlockContext(o)
		if !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("UnlockContext through server 2, where o holds nothing = %v; want ErrNotHeld", err)
		}
		select {
		case <-done1:
			t.Errorf("server 1's hold: Done closed by an unlock sent to server 2")
		default:
		}
		if locked, _ := probe1.IsLocked(ctx); locked {
			if err := m1.UnlockContext(o); err != nil {
				t.Errorf("server 1 still locked by o, but m1.UnlockContext(o) = %v: o cannot release it", err)
			}
		}
		time.Sleep(time.Minute)
	})
}

// ---------------------------------------------------------------------------

// TestAdvStaleLeaseShortensNewHold: the consequence of renew_holds checking
// only the owner, for mutual exclusion. Owner o's hold A, kept through a
// backend value with a 3s watchdog, is force-unlocked; o takes a new hold
// B through another backend value with the default 30s watchdog. A's lease
// goes on renewing B, with PEXPIRE 3s. When A's backend value then fails
// (its renewals stop), B expires on the server 3s later, while B's own lease
// believes it valid until its next renewal at 10s: another owner takes the
// mutex while o's Done for B is open.
func TestAdvStaleLeaseShortensNewHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advshorten"
		o := dsync.WithOwner(ctx)
		fb1 := &advFlaky{Backend: fake.FakeBackend(t, srv)}
		m1 := mutex.New(fb1, name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		x := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if ok, err := x.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		if err := m2.LockContext(o); err != nil { // hold B, 30s watchdog
			t.Fatal(err)
		}
		start := time.Now()
		doneB := m2.Done(o)
		time.Sleep(1500 * time.Millisecond) // A's lease renewed B once, with 3s
		fb1.fail.Store(true)
		// Whenever another owner gets the mutex, B's Done must have fired
		// before. With B's own watchdog renewing it, nobody gets it.
		xHolds := false
		for time.Since(start) <= time.Minute && !xHolds {
			ok, err := x.TryLockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if xHolds = ok; ok {
				select {
				case <-doneB:
				default:
					t.Errorf("another owner took the mutex %v after o's hold B started (30s watchdog, renewed every 10s), while o's Done for B is open: B's expiry was cut to 3s by the renewals of o's earlier, force-unlocked hold A", time.Since(start))
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !xHolds {
			if err := m2.UnlockContext(o); err != nil {
				t.Errorf("o's unlock of B after a minute of holding: %v", err)
			}
			x.Lock()
		}
		x.Unlock()
		fb1.fail.Store(false)
		time.Sleep(time.Minute)
	})
}

// ---------------------------------------------------------------------------

// TestAdvWaiterSetNeverExpires: expire_at_least (lib.lua) skips a key whose
// PTTL is -1, which is what ZADD leaves on a new sorted set, so the waiter
// set never gets the TTL the package doc promises ("expires 15s after the
// last registration"). When the holder and a registered waiter both die,
// the waiter set stays on the server forever.
func TestAdvWaiterSetNeverExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advleak"
		hb, wb := fake.FakeBackend(t, srv), fake.FakeBackend(t, srv)
		holder := mutex.New(hb, name, mutex.WithLogger(nil))
		holder.Lock()
		waiter := mutex.New(wb, name, mutex.WithLogger(nil))
		got := make(chan error, 1)
		go func() { got <- waiter.LockContext(ctx) }()
		synctest.Wait()
		waiters := "dsync:mutex:{" + name + "}:waiters"
		t.Logf("after a registration: TTL(waiters) = %v", srv.TTL(waiters))
		wb.Close() // both processes die
		<-got
		hb.Close()
		time.Sleep(2 * time.Hour) // the lease, the waiter TTL, the fence TTL
		for _, k := range srv.Keys() {
			t.Errorf("key %s left behind 2h after every process died (TTL %v)", k, srv.TTL(k))
		}
	})
}

// ---------------------------------------------------------------------------

// TestLocalWaiterNotStrandedByRefusedRelease: a waiter queued in the
// session behind owner o's hold (see Lease.Enqueue) stays queued when o
// tries to release through another backend value of the process, which is
// refused and changes nothing, and acquires at once when o releases
// through the backend value that took the hold.
func TestLocalWaiterNotStrandedByRefusedRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advstranded"
		b1 := fake.FakeBackend(t, srv)
		m1 := mutex.New(b1, name, mutex.WithLogger(nil))
		m3 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		if err := m1.LockContext(o); err != nil {
			t.Fatal(err)
		}
		// A wait that gives up leaves b1's hub subscribed for a second, so
		// that the next waiter through b1 queues in the session.
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		if err := m1.LockContext(wctx); err == nil {
			t.Fatal("a second owner acquired")
		}
		cancel()
		got := make(chan error, 1)
		go func() { got <- m1.LockContext(ctx) }() // ownerless, queued behind o's hold
		synctest.Wait()
		if err := m3.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) { // same server, other backend value
			t.Fatalf("release through another backend value: %v, want ErrNotHeld", err)
		}
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("the queued waiter returned while o holds the mutex: %v", err)
		default:
		}
		released := time.Now()
		if err := m1.UnlockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d != 0 {
			t.Errorf("the waiter queued behind o's hold acquired %v after o released it, want at once", d)
		}
		m1.Unlock()
	})
}

// ---------------------------------------------------------------------------

// TestAdvReentryDuringHandoffLeaseNoFailure: the same root as
// TestAdvReentryShorterLeaseClientOutlivesServer, without any failure. A
// hold handed to a waiter starts on a 2s lease, which its first renewal
// (at 2s/3) would extend. A re-entry by the same owner through a handle
// with a 1s lease leaves the server's 2s expiry alone, but Lease.Extend
// reschedules the client's lease on its own 30s TTL: next renewal at 10s.
// The hold expires on the server at 2s; another owner takes the mutex; the
// first owner's Done stays open until the renewal at 10s.
func TestAdvReentryDuringHandoffLeaseNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advhandreenter"
		b := fake.FakeBackend(t, srv)
		m1 := mutex.New(b, name, mutex.WithLogger(nil))                               // default 30s watchdog
		m2 := mutex.New(b, name, mutex.WithLease(time.Second), mutex.WithLogger(nil)) // 1s fixed
		holder := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		x := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		holder.Lock()
		got := make(chan error, 1)
		go func() { got <- m1.LockContext(o) }()
		synctest.Wait()
		holder.Unlock() // handed to o on a 2s lease
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := m2.LockContext(o); err != nil { // re-entry, 1s lease
			t.Fatal(err)
		}
		done := m1.Done(o)
		// Whenever another owner gets the mutex, o's Done must have fired
		// before. With the watchdog renewing o's hold, nobody gets it.
		xHolds := false
		for time.Since(start) <= time.Minute && !xHolds {
			ok, err := x.TryLockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if xHolds = ok; ok {
				select {
				case <-done:
				default:
					t.Errorf("another owner took the mutex %v after o's re-entry, with no failure anywhere, while o's Done is open",
						time.Since(start))
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !xHolds {
			for range 2 {
				if err := m1.UnlockContext(o); err != nil {
					t.Errorf("o's unlock after a minute of holding: %v", err)
				}
			}
			x.Lock()
		}
		x.Unlock()
		time.Sleep(time.Minute)
	})
}

// ---------------------------------------------------------------------------

// advLoseReply runs the next script call once armed, then runs during
// before returning a connection error instead of its reply: the call
// applied, the caller does not know, and others ran meanwhile.
type advLoseReply struct {
	backend.Backend
	armed  atomic.Bool
	during func()
}

func (l *advLoseReply) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if l.armed.CompareAndSwap(true, false) {
		if _, err := l.Backend.Eval(ctx, s, keys, args...); err != nil {
			return nil, err
		}
		l.during()
		return nil, errAdvNet
	}
	return l.Backend.Eval(ctx, s, keys, args...)
}

// TestAdvRetriedReleaseAppliesTwice: a release whose reply is lost is
// retried with the same operation id, which the script recognises among
// the lock's 8 most recent ids (lib.lua recent_ops). When the same owner
// runs 8 operations meanwhile (re-entries by its other goroutines, over
// other connections), the id is forgotten and the retry releases a second
// hold: the owner's count on the server is one short, so the mutex is freed
// while one of its goroutines still holds it.
func TestAdvRetriedReleaseAppliesTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advretry"
		o := dsync.WithOwner(ctx)
		lb := &advLoseReply{Backend: fake.FakeBackend(t, srv)}
		m1 := mutex.New(lb, name, mutex.WithLogger(nil))
		m2 := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		for range 2 {
			if err := m1.LockContext(o); err != nil {
				t.Fatal(err)
			}
		}
		lb.during = func() {
			for range 8 { // other goroutines of o re-enter
				if err := m2.LockContext(o); err != nil {
					t.Error(err)
				}
			}
		}
		lb.armed.Store(true)
		if err := m1.UnlockContext(o); err != nil { // 2 + 8 - 1 holds left
			t.Fatal(err)
		}
		n, err := m2.HoldCount(o)
		if err != nil {
			t.Fatal(err)
		}
		if n != 9 {
			t.Errorf("o took 10 holds and released 1: HoldCount = %d, want 9; the retried release was applied twice", n)
		}
		for range 9 {
			m2.UnlockContext(o)
		}
		time.Sleep(time.Minute)
	})
}

// ---------------------------------------------------------------------------

// TestAdvForeignNumberAtLockKey: a foreign string that happens to be a
// number (a counter, say) at the lock key is read as dsync's freed state
// ("<token>") and overwritten by the next acquisition, though dsync's freed
// state always carries an expiry (the fence TTL) and this one has none.
// The package promises a foreign value at the lock key is reported as
// ErrUnexpectedReply and left untouched.
func TestAdvForeignNumberAtLockKey(t *testing.T) {
	srv := testserver.Real(t)
	bg := context.Background()
	name := "advforeignnum-" + dsync.NewID()[:12]
	key := "dsync:mutex:{" + name + "}"
	t.Cleanup(func() { srv.Do(bg, "DEL", key, key+":waiters", key+":fence") })
	if _, err := srv.Do(bg, "SET", key, "42"); err != nil { // no expiry
		t.Fatal(err)
	}
	m := mutex.New(srv.NewBackend(t), name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	ok, err := m.TryLockContext(ctx)
	if ok {
		m.UnlockContext(bg)
	}
	v, _ := srv.Do(bg, "GET", key)
	if ok || !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Errorf("TryLockContext on a lock key holding a foreign \"42\" without expiry = %v, %v; want ErrUnexpectedReply, key untouched (now %q)", ok, err, v)
	}
}

// ---------------------------------------------------------------------------

// TestAdvSubMillisecondLeaseTruncated: leases go to the server in whole
// milliseconds, truncated (core.Ms), while the client's lease keeps the
// exact duration. WithLease(2900µs) passes validation ("at least 1ms"),
// the key expires after 2ms, and the holder's Done fires only at 2.9ms:
// another owner holds the mutex meanwhile.
func TestAdvSubMillisecondLeaseTruncated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "advsubms"
		m := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLease(2900*time.Microsecond), mutex.WithLogger(nil))
		x := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		done := m.Done(o)
		time.Sleep(2500 * time.Microsecond)
		ok, err := x.TryLockContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			select {
			case <-done:
			default:
				t.Errorf("another owner acquired 2.5ms into a 2.9ms fixed lease whose Done is still open: the server was given 2ms")
			}
			x.Unlock()
		}
		time.Sleep(time.Second)
	})
}
