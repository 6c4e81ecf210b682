package rwlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// TestPlainWakeSameOwnerGiveUps: several owners each wait for a
// read hold from three goroutines, on two backend values (two hubs), behind
// a writer; one goroutine of each owner has a deadline on the instant of the
// write release that hands the lock to all of them (the first of an owner
// gets a grant, the others a plain wake-up, rw.lua pass_on), and a writer is
// queued behind them. The releaser is alternately in this process (grants
// delivered from the reply) and in "another" (published). Every round: no
// writer with a reader inside; each owner's read count on the server equals
// the acquisitions that returned nil; every RUnlock succeeds, one more is
// ErrNotHeld; the queued writer gets in; the lock ends free with no keys
// left.
func TestPlainWakeSameOwnerGiveUps(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	bs := []backend.Backend{srv.NewBackend(t), srv.NewBackend(t)}
	open := func(b backend.Backend) *rwlock.RWMutex {
		return rwlock.New(b, "pw", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
	}
	probe := open(srv.NewBackend(t))
	xs := []*rwlock.RWMutex{open(srv.NewBackend(t)), open(elsewhere{srv.NewBackend(t)})}
	y := open(srv.NewBackend(t))
	const owners, per = 3, 3
	// lead is how long after a round starts the write release comes: 80ms,
	// doubled after a round whose readers and writer were not all queued
	// by then (a loaded machine), so that later rounds set the scene.
	lead, inTime := 80*time.Millisecond, 0
	for round := range 16 {
		x := xs[round%2]
		x.Lock()
		var readers, writers atomic.Int32
		var got [owners]atomic.Int32
		var acquired [owners]sync.WaitGroup
		var checked [owners]chan struct{} // closed once the owner's count was read
		for k := range checked {
			checked[k] = make(chan struct{})
		}
		var released sync.WaitGroup
		var yIn atomic.Int64 // when the writer got in, unix ns
		var late atomic.Int32
		at := time.Now().Add(lead)
		for k := range owners {
			octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
			defer ocancel()
			o := dsync.WithOwner(octx)
			for j := range per {
				m := open(bs[j%2])
				acquired[k].Add(1)
				released.Add(1)
				go func() {
					defer released.Done()
					rctx := o
					if j == 0 {
						d := at.Add(time.Duration((round+k)%5-2) * 200 * time.Microsecond)
						var cancel context.CancelFunc
						rctx, cancel = context.WithDeadline(o, d)
						defer cancel()
					}
					err := m.RLockContext(rctx)
					if err == nil {
						got[k].Add(1)
						readers.Add(1)
						if yIn.Load() != 0 {
							late.Add(1)
						}
						if writers.Load() != 0 {
							t.Errorf("round %d: a reader got in with a writer inside", round)
						}
					} else if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("round %d: owner %d reader %d: %v", round, k, j, err)
					}
					// An owner's readers hold until all of its readers got in
					// or gave up (a request reading in parallel): a reader
					// left waiting re-enters its owner's hold at once.
					acquired[k].Done()
					acquired[k].Wait()
					if err != nil {
						return
					}
					// Held until the owner's count on the server was read,
					// however late the goroutine that reads it runs.
					<-checked[k]
					time.Sleep(5 * time.Millisecond)
					readers.Add(-1)
					if err := m.RUnlockContext(o); err != nil {
						t.Errorf("round %d: owner %d reader %d: RUnlock: %v", round, k, j, err)
					}
				}()
			}
			// Check the owner's count once every reader is in or gave up.
			released.Add(1)
			go func() {
				defer released.Done()
				defer close(checked[k])
				acquired[k].Wait()
				if st, err := probe.State(o); err != nil || st.ReadCount != int(got[k].Load()) {
					t.Errorf("round %d: owner %d: %d RLocks returned nil, the server counts %+v, %v", round, k, got[k].Load(), st, err)
				}
			}()
		}
		// Every reader queued before the release, unless the release's
		// instant passed first: then the readers with a deadline gave up
		// before it, and the round goes on without them.
		set := awaitBy(t, ctx, probe, at, func(s rwlock.State) bool { return s.WaitingReaders == owners*per })
		yctx, ycancel := context.WithTimeout(ctx, 10*time.Second)
		oy := dsync.WithOwner(yctx)
		ygot := make(chan error, 1)
		go func() {
			err := y.LockContext(oy)
			if err == nil {
				yIn.Store(time.Now().UnixNano())
				writers.Add(1)
				if r := readers.Load(); r != 0 {
					t.Errorf("round %d: the writer got in with %d readers inside", round, r)
				}
				time.Sleep(2 * time.Millisecond)
				writers.Add(-1)
				err = y.UnlockContext(oy)
			}
			ygot <- err
		}()
		await(t, ctx, probe, "writer queued", func(s rwlock.State) bool { return s.WaitingWriters == 1 })
		if set && time.Now().Before(at) {
			inTime++
		} else {
			t.Logf("round %d: the scene was not set %v after the round began; the next rounds allow %v", round, lead, 2*lead)
			lead = min(2*lead, 5*time.Second)
		}
		time.Sleep(time.Until(at))
		x.Unlock()
		released.Wait()
		if err := <-ygot; err != nil {
			t.Fatalf("round %d: the queued writer: %v", round, err)
		}
		ycancel()
		if n := late.Load(); n > 0 {
			t.Logf("round %d: %d readers waiting at the write release got in only after the queued writer", round, n)
		}
		st := state(t, ctx, probe)
		if st.Mode != rwlock.Free || st.Readers != 0 || st.WaitingReaders != 0 || st.WaitingWriters != 0 {
			t.Fatalf("round %d: at the end: %+v", round, st)
		}
		if t.Failed() {
			break
		}
	}
	if bad := keysLeft(t, srv, p); len(bad) > 0 {
		t.Errorf("keys left: %v", bad)
	}
	if !t.Failed() && inTime < 8 {
		t.Errorf("only %d of 16 rounds had every reader and the writer queued before the release", inTime)
	}
}

// awaitBy polls m's state until cond holds, and reports true, or until by
// passes, and reports false.
func awaitBy(t *testing.T, ctx context.Context, m *rwlock.RWMutex, by time.Time, cond func(rwlock.State) bool) bool {
	t.Helper()
	for i := 0; i < 100000; i++ {
		if cond(state(t, ctx, m)) {
			return true
		}
		if !time.Now().Before(by) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
