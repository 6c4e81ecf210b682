package rwlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestOwnReaderEntersByItsHeartbeat: owner o waits for the write
// lock behind another owner's read hold (head of the writers' queue);
// another goroutine of o then asks for a read hold and, with writer
// preference, waits too (behind o's own queued writer). The read release
// hands the write lock to o's writer and wakes only that writer: o's
// reader, which could now take a read hold under o's write hold, enters at
// its next heartbeat (a third of the waiter timeout), as the package doc
// says. The review found this (it was a test that the reader is woken at
// once); the cost of waking it would be a scan of every waiting reader on
// each hand-off to a writer.
func TestOwnReaderEntersByItsHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		open := func() *rwlock.RWMutex {
			return rwlock.New(fake.FakeBackend(t, srv), "own", rwlock.WithLogger(nil))
		}
		r, m1, m2 := open(), open(), open()
		r.RLock()
		o := dsync.WithOwner(ctx)
		wgot, rgot := make(chan time.Time, 1), make(chan time.Time, 1)
		go func() {
			if err := m1.LockContext(o); err != nil {
				t.Error(err)
			}
			wgot <- time.Now()
		}()
		synctest.Wait()
		go func() {
			if err := m2.RLockContext(o); err != nil {
				t.Error(err)
			}
			rgot <- time.Now()
		}()
		synctest.Wait()
		if st := state(t, ctx, r); st.WaitingWriters != 1 || st.WaitingReaders != 1 {
			t.Fatalf("want o's writer and reader waiting: %+v", st)
		}
		time.Sleep(100 * time.Millisecond) // off the heartbeat's phase
		r.RUnlock()                        // hands the write lock to o
		wAt := <-wgot
		rAt := <-rgot
		if lag, beat := rAt.Sub(wAt), rwlock.DefaultWaiterTimeout/3; lag > beat {
			t.Errorf("o's reader got its read hold %v after o's writer was handed the write lock; want within its heartbeat, %v", lag, beat)
		}
		m2.RUnlockContext(o)
		m1.UnlockContext(o)
		time.Sleep(time.Minute)
	})
}

// TestPlainWokenReaderLosesItsTurn: owner o waits for a read hold
// from two goroutines behind a write hold, and a writer is queued behind
// them. The write release hands the lock to both readers (doc.go: "a
// release of the write lock hands it to every reader waiting at that
// moment ... readers that waited out a write go before the next write"):
// the first entry of o gets the grant, the second only a plain wake-up,
// expected to re-enter o's hold by its next attempt (rw.lua pass_on). That
// second waiter's wake-up lags (a slow subscriber link, or a descheduled
// goroutine: any delay before its attempt), and before it tries, o's hold
// ends through its sibling:
//
//   - "sibling gives up": the granted goroutine's context ends before its
//     grant is delivered; its abandon undoes o's hold;
//   - "sibling releases": the granted goroutine reads quickly and RUnlocks.
//
// Either way the ending hold passes the lock to the queued writer, and the
// plain-woken reader, whose registration pass_on already removed and who
// holds nothing of its own, finds the write lock held, registers anew and
// waits out the whole next write. Deterministic.
func TestPlainWokenReaderLosesItsTurn(t *testing.T) {
	for _, how := range []string{"sibling gives up", "sibling releases"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				// The releaser is in another process, so that wake-ups are
				// published; the granted sibling is the first entry popped:
				// the lowest expiry, so a shorter waiter timeout.
				x := rwlock.New(elsewhere{fake.FakeBackend(t, srv)}, "turn", rwlock.WithLogger(nil))
				g0 := rwlock.New(slowSub{fake.FakeBackend(t, srv), 50 * time.Millisecond}, "turn", rwlock.WithLogger(nil), rwlock.WithWaiterTimeout(time.Second))
				g1 := rwlock.New(slowSub{fake.FakeBackend(t, srv), 200 * time.Millisecond}, "turn", rwlock.WithLogger(nil))
				y := rwlock.New(fake.FakeBackend(t, srv), "turn", rwlock.WithLogger(nil))
				x.Lock()
				o := dsync.WithOwner(ctx)
				g0ctx, g0cancel := context.WithCancel(o)
				defer g0cancel()
				g0got := make(chan error, 1)
				g1got := make(chan time.Time, 1)
				go func() {
					err := g0.RLockContext(g0ctx)
					if err == nil {
						err = g0.RUnlockContext(o) // a quick read
					}
					g0got <- err
				}()
				synctest.Wait()
				go func() {
					if err := g1.RLockContext(o); err != nil {
						t.Error(err)
					}
					g1got <- time.Now()
					g1.RUnlockContext(o)
				}()
				synctest.Wait()
				oy := dsync.WithOwner(ctx)
				ygot := make(chan time.Time, 1)
				go func() {
					if err := y.LockContext(oy); err != nil {
						t.Error(err)
					}
					ygot <- time.Now()
					time.Sleep(time.Second) // the next write
					y.UnlockContext(oy)
				}()
				synctest.Wait()
				if st := state(t, ctx, y); st.WaitingReaders != 2 || st.WaitingWriters != 1 {
					t.Fatalf("want o's two readers and a writer waiting: %+v", st)
				}
				x.Unlock()
				if how == "sibling gives up" {
					g0cancel()
				}
				err := <-g0got
				if how == "sibling releases" && err != nil {
					t.Fatal(err)
				}
				g1At, yAt := <-g1got, <-ygot
				if g1At.After(yAt) {
					t.Errorf("%s: o's second reader, waiting when the write lock was released and handed it by that release, got in %v after the writer queued behind it got the write lock: it waited out the next write", how, g1At.Sub(yAt))
				}
				time.Sleep(time.Minute)
			})
		})
	}
}
