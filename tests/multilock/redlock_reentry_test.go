package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// A RedLock re-entered by its owner does not wait for a member it does
// not need (issue 26, defect 4): over 3 servers, another owner holds
// member 3 and owner O holds the RedLock through members 1 and 2;
// LockContext with a 500ms deadline re-enters at once, as TryLockContext
// does, and two unlocks then release it (the first keeps it held).
func TestRedLockReentryDoesNotWaitForABusyMember(t *testing.T) {
	real := testserver.Real(t)
	servers := map[string][]func() *mutex.Mutex{}
	for kind := range 2 {
		var members []func() *mutex.Mutex
		for i := range 3 {
			var addr string
			if kind == 0 {
				addr = real.Addr()
			} else {
				addr = miniredis.RunT(t).Addr()
			}
			name := "redlock-reentry-" + dsync.NewID()[:8] + string(rune('a'+i))
			b := tcpBackend(t, addr)
			members = append(members, func() *mutex.Mutex { return mutex.New(b, name) })
		}
		servers[[]string{"redis", "miniredis"}[kind]] = members
	}
	for kind, members := range servers {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			other := members[2]()
			oo := dsync.WithOwner(ctx)
			if err := other.LockContext(oo); err != nil {
				t.Fatal(err)
			}
			defer other.UnlockContext(oo)
			var ms []dsync.Locker
			for _, m := range members {
				ms = append(ms, m())
			}
			l := multilock.RedLock(ms...)
			o := dsync.WithOwner(ctx)
			if ok, err := l.TryLockContext(o); !ok || err != nil {
				t.Fatalf("TryLockContext with 2 of 3 members free = %v, %v", ok, err)
			}
			if ok, err := l.TryLockContext(o); !ok || err != nil {
				t.Fatalf("TryLockContext re-entry = %v, %v", ok, err)
			}
			short, c := context.WithTimeout(o, 500*time.Millisecond)
			start := time.Now()
			err := l.LockContext(short)
			took := time.Since(start)
			c()
			t.Logf("LockContext re-entry with member 3 held elsewhere: %v after %v", err, took.Round(time.Millisecond))
			if err != nil {
				t.Fatalf("LockContext re-entry: %v after %v; want it at once", err, took)
			}
			if took > 200*time.Millisecond {
				t.Errorf("LockContext re-entry took %v; want it at once (no wait for member 3)", took)
			}
			// The same through another multi-lock over other handles of
			// the members (on the same backends): the owner holds them,
			// whichever multi-lock it used.
			var again []dsync.Locker
			for _, m := range members {
				again = append(again, m())
			}
			l2 := multilock.RedLock(again...)
			short, c = context.WithTimeout(o, 500*time.Millisecond)
			start = time.Now()
			err = l2.LockContext(short)
			took = time.Since(start)
			c()
			t.Logf("through another multi-lock value: %v after %v", err, took.Round(time.Millisecond))
			if err != nil || took > 200*time.Millisecond {
				t.Fatalf("LockContext re-entry through another multi-lock value: %v after %v; want it at once", err, took)
			}
			if err := l2.UnlockContext(o); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := l.UnlockContext(o); err != nil {
					t.Fatalf("unlock %d of 3: %v", i+1, err)
				}
				locked, err := ms[0].(*mutex.Mutex).IsLocked(ctx)
				if err != nil || locked != (i < 2) {
					t.Fatalf("after unlock %d of 3: member 1 locked = %v, %v", i+1, locked, err)
				}
			}
			// An owner that holds nothing still queues for the busy member.
			fresh := dsync.WithOwner(ctx)
			short, c = context.WithTimeout(fresh, 300*time.Millisecond)
			defer c()
			if err := l.LockContext(short); err == nil {
				// A first round that finds member 3 busy waits for it
				// (up to a second) before it may win without it.
				t.Fatal("a fresh owner took the RedLock within 300ms with member 3 busy; want it to wait its turn for member 3")
			}

		})
	}
}
