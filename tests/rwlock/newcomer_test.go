package rwlock_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// holdOrder records who held the lock, in order.
type holdOrder struct {
	mu    sync.Mutex
	names []string
}

// hold starts lock in the background; once it holds, it records name,
// calls unlock, and sends the error (nil) on the channel it returns.
func (o *holdOrder) hold(name string, lock, unlock func() error) <-chan error {
	got := make(chan error, 1)
	go func() {
		if err := lock(); err != nil {
			got <- err
			return
		}
		o.mu.Lock()
		o.names = append(o.names, name)
		o.mu.Unlock()
		got <- unlock()
	}()
	return got
}

func (o *holdOrder) writer(ctx context.Context, m *rwlock.RWMutex, name string) <-chan error {
	return o.hold(name, func() error { return m.LockContext(ctx) }, func() error { return m.UnlockContext(ctx) })
}

func (o *holdOrder) reader(ctx context.Context, m *rwlock.RWMutex, name string) <-chan error {
	return o.hold(name, func() error { return m.RLockContext(ctx) }, func() error { return m.RUnlockContext(ctx) })
}

func (o *holdOrder) order() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.names...)
}

// within returns what c carries, or fails t if nothing comes within a
// minute of the bubble's clock.
func within(t *testing.T, c <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: nothing within a minute", what)
		return nil
	}
}

// newcomers are the two ways a fresh acquisition reaches the server: a
// plain SET NX first (a backend with backend.Setter), or the acquire
// script's fast path (one without: fake.Gated hides the Setter).
var newcomers = []struct {
	name string
	wrap func(t *testing.T, b backend.Backend) backend.Backend
}{
	{"plain SET", func(t *testing.T, b backend.Backend) backend.Backend { return b }},
	{"script", func(t *testing.T, b backend.Backend) backend.Backend { return fake.NewGated(t, b) }},
}

// keptOut makes TryLockContext and, unless writeOnly, TryRLockContext on
// m, which must both fail.
func keptOut(t *testing.T, ctx context.Context, m *rwlock.RWMutex, writeOnly bool, when string) {
	t.Helper()
	if ok, err := m.TryLockContext(ctx); ok || err != nil {
		if ok {
			m.UnlockContext(ctx)
		}
		t.Fatalf("a newcomer's TryLock %s = %v, %v; want false", when, ok, err)
	}
	if writeOnly {
		return
	}
	if ok, err := m.TryRLockContext(ctx); ok || err != nil {
		if ok {
			m.RUnlockContext(ctx)
		}
		t.Fatalf("a newcomer's TryRLock %s = %v, %v; want false: a writer is queued", when, ok, err)
	}
}

// TestPlainWriterWaitsForExpiredWriteHoldsQueue: a newcomer never takes
// the lock ahead of a live queued writer, nor a read hold while a writer
// waits (writer preference), also once the write hold they queued behind
// is gone without a release: the lock's main key outlives that hold while
// they are queued, so that a plain SET NX fails as the script does. The
// waiters then hold it in the order a release would have given them.
func TestPlainWriterWaitsForExpiredWriteHoldsQueue(t *testing.T) {
	for _, nc := range newcomers {
		t.Run(nc.name+"/hold ran out", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "ranout"
				holder := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLease(time.Second), rwlock.WithLogger(nil))
				holder.Lock() // never unlocked: the hold runs out
				// The waiters' next attempts, due when the hold runs out,
				// are held up: the lock is free with a writer and a reader
				// queued.
				wb := fake.NewGated(t, fake.FakeBackend(t, srv))
				rb := fake.NewGated(t, fake.FakeBackend(t, srv))
				var o holdOrder
				wGot := o.writer(ctx, rwlock.New(wb, name, rwlock.WithLogger(nil)), "writer")
				synctest.Wait()
				rGot := o.reader(ctx, rwlock.New(rb, name, rwlock.WithLogger(nil)), "reader")
				synctest.Wait()
				wb.HoldEvals()
				rb.HoldEvals()
				time.Sleep(1100 * time.Millisecond)
				n := rwlock.New(nc.wrap(t, fake.FakeBackend(t, srv)), name, rwlock.WithLogger(nil))
				keptOut(t, ctx, n, false, "after the write hold ran out")
				nGot := o.writer(ctx, n, "newcomer")
				synctest.Wait()
				wb.OpenEvals()
				rb.OpenEvals()
				for _, c := range []<-chan error{wGot, rGot, nGot} {
					if err := within(t, c, "an acquisition"); err != nil {
						t.Fatal(err)
					}
				}
				// As a release of the write hold would have: the reader
				// that waited it out first, then the writers in turn.
				if got := o.order(); len(got) != 3 || got[0] != "reader" || got[1] != "writer" {
					t.Errorf("held in the order %v; want the waiting reader, then the queued writer, then the newcomer", got)
				}
			})
		})
		t.Run(nc.name+"/handed to a dead writer", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "handeddead"
				holder := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil))
				holder.Lock()
				db := fake.FakeBackend(t, srv)
				deadGot := make(chan error, 1)
				go func() { deadGot <- rwlock.New(db, name, rwlock.WithLogger(nil)).LockContext(ctx) }()
				synctest.Wait()
				lb := fake.NewGated(t, fake.FakeBackend(t, srv))
				var o holdOrder
				liveGot := o.writer(ctx, rwlock.New(lb, name, rwlock.WithLogger(nil)), "live")
				synctest.Wait()
				// The live writer's next attempt is held up.
				lb.HoldEvals()
				db.Close() // the head's process dies: no heartbeat, no abandon
				if err := within(t, deadGot, "the dead writer's LockContext"); err == nil {
					t.Fatal("the dead writer acquired")
				}
				// Handed to the dead head on the hand-off lease (2s), with
				// the live writer behind it.
				holder.Unlock()
				time.Sleep(2100 * time.Millisecond)
				n := rwlock.New(nc.wrap(t, fake.FakeBackend(t, srv)), name, rwlock.WithLogger(nil))
				keptOut(t, ctx, n, false, "after a hand-off to a dead writer ran out")
				nGot := o.writer(ctx, n, "newcomer")
				synctest.Wait()
				lb.OpenEvals()
				for _, c := range []<-chan error{liveGot, nGot} {
					if err := within(t, c, "an acquisition"); err != nil {
						t.Fatal(err)
					}
				}
				if got := o.order(); len(got) != 2 || got[0] != "live" {
					t.Errorf("held in the order %v; want the live writer first", got)
				}
			})
		})
	}
}

// TestPlainWriterAfterDowngradeLeaseEnds: an owner holds the write lock
// on a fixed lease and takes a read hold (a downgrade) on the watchdog.
// Once the write lease ends, the read hold lives on, and no other owner's
// writer may take the lock while it does: the lock's main key outlives
// the read hold, renewal after renewal.
func TestPlainWriterAfterDowngradeLeaseEnds(t *testing.T) {
	for _, nc := range newcomers {
		t.Run(nc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "downgrade"
				b := fake.FakeBackend(t, srv)
				w := rwlock.New(b, name, rwlock.WithLease(time.Second), rwlock.WithLogger(nil))
				r := rwlock.New(b, name, rwlock.WithWatchdog(600*time.Millisecond), rwlock.WithLogger(nil))
				o := dsync.WithOwner(ctx)
				if err := w.LockContext(o); err != nil {
					t.Fatal(err)
				}
				if err := r.RLockContext(o); err != nil {
					t.Fatal(err)
				}
				n := rwlock.New(nc.wrap(t, fake.FakeBackend(t, srv)), name, rwlock.WithLogger(nil))
				// Past the write lease, then past five of the read hold's
				// leases: its renewals must keep the main key too.
				for _, d := range []time.Duration{1100 * time.Millisecond, 3 * time.Second} {
					time.Sleep(d)
					keptOut(t, ctx, n, true, "while the downgraded read hold lives")
					select {
					case <-r.RDone(o):
						t.Fatal("the downgraded read hold was lost")
					default:
					}
				}
				if err := r.RUnlockContext(o); err != nil {
					t.Fatal(err)
				}
				if ok, err := n.TryLockContext(ctx); !ok || err != nil {
					t.Fatalf("TryLock once the read hold was released = %v, %v; want true", ok, err)
				}
				n.UnlockContext(ctx)
			})
		})
	}
}

// TestReadersToldWhenWDeleted: readers hold and the lock's main key alone
// is deleted behind dsync's back (or evicted), so that a plain writer
// takes it: each reader must learn that its read hold is lost at its next
// renewal, as a mutex holder learns that its key went.
func TestReadersToldWhenWDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "wdeleted"
		const lease = 600 * time.Millisecond
		var readers []*rwlock.RWMutex
		for range 2 {
			r := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithWatchdog(lease), rwlock.WithLogger(nil))
			if err := r.RLockContext(ctx); err != nil {
				t.Fatal(err)
			}
			readers = append(readers, r)
		}
		srv.Del(key("dsync", name))
		w := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLogger(nil))
		ok, err := w.TryLockContext(ctx)
		if err != nil || !ok {
			t.Fatalf("a plain writer's TryLock with the main key deleted = %v, %v; want true (the move documented)", ok, err)
		}
		for i, r := range readers {
			select {
			case <-r.RDone(ctx):
			case <-time.After(lease):
				t.Errorf("reader %d not told within a lease (%v) that a writer holds the lock", i, lease)
			}
		}
		if err := w.UnlockContext(ctx); err != nil {
			t.Error(err)
		}
	})
}
