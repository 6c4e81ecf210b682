package multilock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// The multilock tests on miniredis: several embedded servers in one
// process, and fake time in a synctest bubble for the leases.

// TestAllOnMiniredis: a member held elsewhere blocks the group and the
// others are free right after; two groups over the same members in
// opposite orders both make progress for 2s.
func TestAllOnMiniredis(t *testing.T) {
	srv := fake.Mini(t)
	b1, b2 := srv.NewBackend(t), srv.NewBackend(t)
	names := []string{t.Name() + ":a", t.Name() + ":b", t.Name() + ":c"}
	open := func(order ...int) *multilock.Lock {
		b := srv.NewBackend(t)
		var ms []dsync.Locker
		for _, i := range order {
			ms = append(ms, mutex.New(b, names[i]))
		}
		return multilock.All(ms...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	other := mutex.New(b2, names[1])
	oo := dsync.WithOwner(ctx)
	if err := other.LockContext(oo); err != nil {
		t.Fatal(err)
	}
	l := open(0, 1, 2)
	o := dsync.WithOwner(ctx)
	if ok, err := l.TryLockContext(o); ok || err != nil {
		t.Fatalf("TryLockContext = %v, %v; want false", ok, err)
	}
	for _, n := range []string{names[0], names[2]} {
		if locked, err := mutex.New(b1, n).IsLocked(ctx); err != nil || locked {
			t.Fatalf("%s locked = %v, %v after the failed try", n, locked, err)
		}
	}
	if err := other.UnlockContext(oo); err != nil {
		t.Fatal(err)
	}

	groups := []*multilock.Lock{open(0, 1, 2), open(2, 1, 0)}
	var counts [2]atomic.Int64
	var inside atomic.Int32
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for g, l := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000 && time.Now().Before(stop); i++ {
				o := dsync.WithOwner(ctx)
				if err := l.LockContext(o); err != nil {
					t.Errorf("group %d: %v", g, err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("both groups hold the lock")
				}
				counts[g].Add(1)
				inside.Add(-1)
				if err := l.UnlockContext(o); err != nil {
					t.Errorf("group %d unlock: %v", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("acquisitions in 2s: %d and %d", counts[0].Load(), counts[1].Load())
	if counts[0].Load() == 0 || counts[1].Load() == 0 {
		t.Fatal("a group made no progress")
	}
}

// TestRedLockOnMiniredis: 5 embedded servers; with 2 closed RedLock
// acquires, with 3 closed it fails by ctx's deadline and holds nothing,
// and with the servers back it is usable again.
func TestRedLockOnMiniredis(t *testing.T) {
	var srvs []*miniredis.Miniredis
	var members []dsync.Locker
	for range 5 {
		s := miniredis.RunT(t)
		srvs = append(srvs, s)
		members = append(members, mutex.New(tcpBackend(t, s.Addr()), t.Name()))
	}
	l := multilock.RedLock(members...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := dsync.WithOwner(ctx)

	srvs[0].Close()
	srvs[1].Close()
	if err := l.LockContext(o); err != nil {
		t.Fatalf("with 2 of 5 closed: %v", err)
	}
	if err := l.UnlockContext(o); err != nil {
		t.Fatal(err)
	}
	srvs[2].Close()
	short, c := context.WithTimeout(o, 500*time.Millisecond)
	defer c()
	start := time.Now()
	if err := l.LockContext(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with 3 of 5 closed: %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("failed after %v, the deadline was 500ms", el)
	}
	for _, s := range srvs[3:] {
		if keys := s.Keys(); len(keys) > 0 && hasHold(s, keys) {
			t.Fatalf("keys left held on a live server: %v", keys)
		}
	}
	for _, s := range srvs[:3] {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.LockContext(o); err != nil {
		t.Fatalf("after the servers returned: %v", err)
	}
	if err := l.UnlockContext(o); err != nil {
		t.Fatal(err)
	}
}

// hasHold reports whether a mutex hold is among keys: any key but the
// fence keys a free mutex leaves behind.
func hasHold(s *miniredis.Miniredis, keys []string) bool {
	for _, k := range keys {
		v, err := s.Get(k)
		if err != nil || len(v) < 5 || v[len(v)-5:] != " free" {
			if len(k) < 6 || k[len(k)-6:] != ":fence" {
				return true
			}
		}
	}
	return false
}

// TestFakeTimeRedLockFixedLease: in fake time, a RedLock whose members
// hold a fixed lease keeps it for the lease and its Done closes when the
// majority's leases run out; a second RedLock then acquires.
func TestFakeTimeRedLockFixedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const leaseD = 10 * time.Second
		var a, b []dsync.Locker
		for range 3 {
			s := fake.Fake(t)
			a = append(a, mutex.New(fake.FakeBackend(t, s), "fixed", mutex.WithLease(leaseD)))
			b = append(b, mutex.New(fake.FakeBackend(t, s), "fixed", mutex.WithLease(leaseD)))
		}
		la := multilock.NewRedLock(a, multilock.WithLease(leaseD))
		lb := multilock.NewRedLock(b, multilock.WithLease(leaseD))
		ctx := context.Background()
		ao, bo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
		start := time.Now()
		if ok, err := la.TryLockContext(ao); !ok || err != nil {
			t.Fatalf("first RedLock: %v, %v", ok, err)
		}
		done := la.Done(ao)
		time.Sleep(leaseD / 2)
		if ok, err := lb.TryLockContext(bo); ok || err != nil {
			t.Fatalf("second RedLock within the lease: %v, %v; want false", ok, err)
		}
		<-done
		lost := time.Since(start)
		if lost > leaseD || lost < leaseD*9/10 {
			t.Fatalf("Done closed after %v, want just before the %v lease", lost, leaseD)
		}
		time.Sleep(leaseD - lost + time.Millisecond)
		if ok, err := lb.TryLockContext(bo); !ok || err != nil {
			t.Fatalf("second RedLock after the lease: %v, %v; want true", ok, err)
		}
		if err := la.UnlockContext(ao); !errors.Is(err, dsync.ErrNotHeld) {
			t.Fatalf("unlock of the expired RedLock = %v, want ErrNotHeld", err)
		}
		if err := lb.UnlockContext(bo); err != nil {
			t.Fatal(err)
		}
	})
}

// tcpBackend is a backend on a miniredis's loopback address: closing the
// server cuts it off, as it would a process.
func tcpBackend(t *testing.T, addr string) backend.Backend {
	pool := &redis.Pool{MaxIdle: 8, DialContext: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, "tcp", addr, redis.DialConnectTimeout(200*time.Millisecond))
	}}
	b := bredigo.New(pool)
	t.Cleanup(func() { b.Close(); pool.Close() })
	return b
}
