package rwlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestDowngradeUpgradeSequences: downgrade and upgrade sequences
// across two handles on two backend values of one owner; each hold is
// released through the backend value that took it.
func TestDowngradeUpgradeSequences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		m1 := rwlock.New(fake.FakeBackend(t, srv), "seq", rwlock.WithLogger(nil))
		m2 := rwlock.New(fake.FakeBackend(t, srv), "seq", rwlock.WithLogger(nil))
		probe := rwlock.New(fake.FakeBackend(t, srv), "seq", rwlock.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		step := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		step("Lock via m1", m1.LockContext(o))
		step("RLock via m2 (downgrade)", m2.RLockContext(o))
		step("Lock via m2 (write re-entry while holding both)", m2.LockContext(o))
		if st := state(t, o, probe); st.WriteCount != 2 || st.ReadCount != 1 {
			t.Errorf("after Lock, RLock, Lock: %+v; want write 2, read 1", st)
		}
		step("Unlock via m2", m2.UnlockContext(o))
		step("Unlock via m1", m1.UnlockContext(o))
		if err := m1.LockContext(o); !errors.Is(err, dsync.ErrUpgrade) {
			t.Errorf("Lock with only the read hold left = %v; want ErrUpgrade", err)
		}
		if ok, err := m2.TryLockContext(o); ok || !errors.Is(err, dsync.ErrUpgrade) {
			t.Errorf("TryLock with only the read hold left = %v, %v; want ErrUpgrade", ok, err)
		}
		step("RLock via m1 (read re-entry)", m1.RLockContext(o))
		if st := state(t, o, probe); st.Mode != rwlock.Read || st.ReadCount != 2 {
			t.Errorf("after the re-entry: %+v; want read 2", st)
		}
		step("RUnlock via m1", m1.RUnlockContext(o))
		step("RUnlock via m2", m2.RUnlockContext(o))
		if err := m1.RUnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("an extra RUnlock = %v; want ErrNotHeld", err)
		}
		step("Lock after the read hold ended", m2.LockContext(o))
		tok, err := m2.Token(o)
		step("Token", err)
		step("RLock via m1 (downgrade again)", m1.RLockContext(o))
		if err := m2.RUnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("RUnlock via m2 of a read hold taken through m1 = %v; want ErrNotHeld", err)
		}
		step("RUnlock via m1", m1.RUnlockContext(o))
		if tok2, err := m2.Token(o); err != nil || tok2 != tok {
			t.Errorf("Token after a read in and out under the write hold: %d, %v; want %d", tok2, err, tok)
		}
		if err := m1.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("Unlock via m1 of a write hold taken through m2 = %v; want ErrNotHeld", err)
		}
		step("Unlock", m2.UnlockContext(o))
		if st := state(t, ctx, probe); st.Mode != rwlock.Free {
			t.Errorf("at the end: %+v", st)
		}
		time.Sleep(time.Minute)
	})
}

// TestMixedLeasesOneOwner: an owner's read hold kept by the
// watchdog, re-entered and partly released through a fixed-lease handle,
// must stay held past the fixed lease.
func TestMixedLeasesOneOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		wd := rwlock.New(fake.FakeBackend(t, srv), "mix", rwlock.WithLogger(nil), rwlock.WithWatchdog(3*time.Second))
		fx := rwlock.New(fake.FakeBackend(t, srv), "mix", rwlock.WithLogger(nil), rwlock.WithLease(300*time.Millisecond))
		o := dsync.WithOwner(ctx)
		if err := wd.RLockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := fx.RLockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := fx.RUnlockContext(o); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		select {
		case <-wd.RDone(o):
			t.Error("the watchdog read hold was lost after a re-entry and partial release through a fixed-lease handle")
		default:
		}
		if st := state(t, o, wd); st.ReadCount != 1 {
			t.Errorf("after 10s: %+v; want read count 1", st)
		}
		if err := wd.RUnlockContext(o); err != nil {
			t.Error(err)
		}
		// Fixed first, then watchdog re-entry, then the fixed lease ends:
		// the hold follows the longer.
		if err := fx.RLockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := wd.RLockContext(o); err != nil {
			t.Fatal(err)
		}
		wd.RUnlockContext(o)
		fx.RUnlockContext(o)
		if st := state(t, ctx, wd); st.Mode != rwlock.Free {
			t.Errorf("at the end: %+v", st)
		}
		time.Sleep(time.Minute)
	})
}

// TestReadersGiveUpAtHandOff: readers whose deadline falls on the
// instant of the write release that hands them the lock: none may be left
// holding (an abandoned hand-off is undone at once, not at its lease's end).
func TestReadersGiveUpAtHandOff(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	open := func() *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), "gu", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
	}
	w := open()
	rs := make([]*rwlock.RWMutex, 8)
	for i := range rs {
		rs[i] = open()
	}
	for round := range 15 {
		w.Lock()
		at := time.Now().Add(60 * time.Millisecond)
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Go(func() {
				d := at.Add(time.Duration(i%4-2) * 300 * time.Microsecond)
				rctx, cancel := context.WithDeadline(ctx, d)
				defer cancel()
				if err := r.RLockContext(rctx); err == nil {
					r.RUnlock()
				} else if !errors.Is(err, context.DeadlineExceeded) {
					t.Error(err)
				}
			})
		}
		time.Sleep(time.Until(at))
		w.Unlock()
		wg.Wait()
		st := state(t, ctx, w)
		if st.Mode != rwlock.Free || st.Readers != 0 || st.WaitingReaders != 0 {
			t.Fatalf("round %d: after every reader got in and out or gave up: %+v", round, st)
		}
	}
	if bad := keysLeft(t, srv, p); len(bad) > 0 {
		t.Errorf("keys left: %v", bad)
	}
}

// TestRestartWhileHeld: the server restarts (empty) while readers
// hold and a writer waits: the readers learn of the loss, the writer gets
// in, and its token is above every token handed out before.
func TestRestartWhileHeld(t *testing.T) {
	srv := testserver.Real(t)
	if !srv.Restartable() {
		t.Skip("external server")
	}
	ctx := context.Background()
	p := prefix(t)
	open := func() *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), "rs", rwlock.WithPrefix(p), rwlock.WithLogger(nil), rwlock.WithWatchdog(900*time.Millisecond))
	}
	r1, r2, w := open(), open(), open()
	r1.RLock()
	r2.RLock()
	before := state(t, ctx, w).Token
	got := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	o := dsync.WithOwner(wctx)
	go func() { got <- w.LockContext(o) }()
	await(t, ctx, w, "writer queued", func(s rwlock.State) bool { return s.WaitingWriters == 1 })
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for i, r := range []*rwlock.RWMutex{r1, r2} {
		select {
		case <-r.RDone(ctx):
		case <-time.After(3 * time.Second):
			t.Errorf("reader %d: RDone not closed 3s after the restart", i+1)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("writer after restart: %v", err)
	}
	if tok, _ := w.Token(o); tok <= before {
		t.Errorf("write token after the restart %d; want > %d", tok, before)
	}
	w.UnlockContext(o)
}
