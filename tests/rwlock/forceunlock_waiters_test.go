package rwlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// TestForceUnlockWithWaiters: ForceUnlock while (a) a writer
// holds with a downgraded read hold, or (b) two readers hold, and in both
// cases readers wait and a writer is queued; the ForceUnlock caller is in
// this process or in "another". Every hold taken reports lost at once
// (Done, RDone) and its release is ErrNotHeld; every waiter gets in, the
// readers before the writer; the lock ends free with no key left.
func TestForceUnlockWithWaiters(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	for _, held := range []string{"writer", "readers"} {
		for _, away := range []bool{false, true} {
			name := held
			if away {
				name += " elsewhere"
			}
			t.Run(name, func(t *testing.T) {
				p := prefix(t)
				open := func() *rwlock.RWMutex {
					return rwlock.New(srv.NewBackend(t), "fu", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
				}
				admin := open()
				if away {
					admin = rwlock.New(elsewhere{srv.NewBackend(t)}, "fu", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
				}
				probe := open()
				hctx, hcancel := context.WithCancel(ctx)
				defer hcancel()
				var holders []context.Context
				h := open()
				if held == "writer" {
					o := dsync.WithOwner(hctx)
					if err := h.LockContext(o); err != nil {
						t.Fatal(err)
					}
					if err := h.RLockContext(o); err != nil {
						t.Fatal(err)
					}
					holders = append(holders, o)
				} else {
					for range 2 {
						o := dsync.WithOwner(hctx)
						if err := h.RLockContext(o); err != nil {
							t.Fatal(err)
						}
						holders = append(holders, o)
					}
				}
				var wg sync.WaitGroup
				wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
				defer wcancel()
				var mu sync.Mutex
				var readersIn []time.Time
				var writerIn time.Time
				oy := dsync.WithOwner(wctx)
				y := open()
				if held == "readers" {
					// The writer first, so that the readers wait behind it.
					wg.Go(func() {
						if err := y.LockContext(oy); err != nil {
							t.Errorf("writer: %v", err)
							return
						}
						mu.Lock()
						writerIn = time.Now()
						mu.Unlock()
						y.UnlockContext(oy)
					})
					await(t, ctx, probe, "writer queued", func(s rwlock.State) bool { return s.WaitingWriters == 1 })
				}
				for range 3 {
					r := open()
					wg.Go(func() {
						o := dsync.WithOwner(wctx)
						if err := r.RLockContext(o); err != nil {
							t.Errorf("reader: %v", err)
							return
						}
						mu.Lock()
						readersIn = append(readersIn, time.Now())
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
						if err := r.RUnlockContext(o); err != nil {
							t.Errorf("reader's RUnlock: %v", err)
						}
					})
				}
				await(t, ctx, probe, "readers waiting", func(s rwlock.State) bool { return s.WaitingReaders == 3 })
				if held == "writer" {
					wg.Go(func() {
						if err := y.LockContext(oy); err != nil {
							t.Errorf("writer: %v", err)
							return
						}
						mu.Lock()
						writerIn = time.Now()
						mu.Unlock()
						y.UnlockContext(oy)
					})
					await(t, ctx, probe, "writer queued", func(s rwlock.State) bool { return s.WaitingWriters == 1 })
				}
				if took, err := admin.ForceUnlock(ctx); !took || err != nil {
					t.Fatalf("ForceUnlock = %v, %v", took, err)
				}
				for i, o := range holders {
					if held == "writer" {
						select {
						case <-h.Done(o):
						default:
							t.Errorf("the write hold's Done is open right after ForceUnlock")
						}
					}
					select {
					case <-h.RDone(o):
					default:
						t.Errorf("holder %d: RDone is open right after ForceUnlock", i)
					}
				}
				wg.Wait()
				for i, o := range holders {
					if held == "writer" {
						if err := h.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
							t.Errorf("Unlock of the taken write hold = %v; want ErrNotHeld", err)
						}
					}
					if err := h.RUnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
						t.Errorf("holder %d: RUnlock of a taken read hold = %v; want ErrNotHeld", i, err)
					}
				}
				if len(readersIn) != 3 || writerIn.IsZero() {
					t.Fatalf("not everyone got in: %d readers, writer %v", len(readersIn), writerIn)
				}
				for _, at := range readersIn {
					if at.After(writerIn) {
						t.Errorf("a reader waiting at the ForceUnlock got in after the queued writer")
					}
				}
				if st := state(t, ctx, probe); st.Mode != rwlock.Free || st.WaitingReaders+st.WaitingWriters != 0 {
					t.Errorf("at the end: %+v", st)
				}
				if bad := keysLeft(t, srv, p); len(bad) > 0 {
					t.Errorf("keys left: %v", bad)
				}
			})
		}
	}
}
