package rwlock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestWriterInAtReaderLeaseEnd: a reader on a fixed lease never
// releases; a waiting writer must get in when the lease ends, not a
// heartbeat later. Also with two such readers of different leases.
func TestWriterInAtReaderLeaseEnd(t *testing.T) {
	for _, leases := range [][]time.Duration{{time.Second}, {700 * time.Millisecond, 3 * time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			srv := fake.Fake(t)
			ctx := context.Background()
			start := time.Now()
			var last time.Duration
			for _, d := range leases {
				m := rwlock.New(fake.FakeBackend(t, srv), "end", rwlock.WithLogger(nil), rwlock.WithLease(d))
				m.RLock()
				last = max(last, d)
			}
			w := rwlock.New(fake.FakeBackend(t, srv), "end", rwlock.WithLogger(nil))
			if err := w.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > last+20*time.Millisecond {
				t.Errorf("read leases %v: the writer got in %v after the readers locked; want at the end of the longest lease, %v", leases, took, last)
			}
			w.Unlock()
			time.Sleep(time.Minute)
		})
	}
}

// elsewhere makes a backend act as if in a process of its own: scripts
// that hand the lock to a waiter publish the wake-up through pub/sub.
type elsewhere struct{ backend.Backend }

func (e elsewhere) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	args = slices.Clone(args)
	for i, a := range args {
		if id, ok := a.(string); ok && hub.IsID(id) {
			args[i] = "elsewhere"
		}
	}
	reply, err := e.Backend.Eval(ctx, s, keys, args...)
	if a, ok := reply.([]any); ok && len(a) > 2 {
		if _, id := a[1].(string); id && len(keys) == 7 {
			reply = a[:2] // the caller does not see whom it woke
		}
	}
	return reply, err
}

// TestReadersAfterPubSubKilled: readers of "another process" wait
// behind a writer; their pub/sub connection is killed just before the
// write release, whose wake-ups are then published to nobody. The readers
// must still get in promptly (a resubscription wakes them to try again),
// not only at their next heartbeat.
func TestReadersAfterPubSubKilled(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	const timeout = 3 * time.Second // heartbeat 1s
	w := rwlock.New(elsewhere{srv.NewBackend(t)}, "ps", rwlock.WithPrefix(p), rwlock.WithLogger(nil), rwlock.WithWaiterTimeout(timeout))
	rb := srv.NewBackend(t)
	w.Lock()
	var wg sync.WaitGroup
	done := make(chan time.Time, 5)
	for range 5 {
		r := rwlock.New(rb, "ps", rwlock.WithPrefix(p), rwlock.WithLogger(nil), rwlock.WithWaiterTimeout(timeout))
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := r.RLockContext(rctx); err != nil {
				t.Error(err)
				return
			}
			done <- time.Now()
			r.RUnlock()
		})
	}
	await(t, ctx, w, "readers waiting", func(s rwlock.State) bool { return s.WaitingReaders == 5 })
	if err := srv.KillPubSub(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	w.Unlock()
	wg.Wait()
	close(done)
	var worst time.Duration
	for at := range done {
		worst = max(worst, at.Sub(released))
	}
	t.Logf("slowest reader got in %v after the release", worst)
	if worst > 500*time.Millisecond {
		t.Errorf("with its subscription killed, a reader got in %v after the write release (heartbeat %v)", worst, timeout/3)
	}
}

// TestScriptFlushAndStallMidWait: SCRIPT FLUSH and a server stall
// while readers and a writer wait; everyone gets in, counts exact.
func TestScriptFlushAndStallMidWait(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	open := func() *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), "fl", rwlock.WithPrefix(p), rwlock.WithLogger(nil), rwlock.WithWatchdog(3*time.Second))
	}
	x := open()
	x.Lock()
	var wg sync.WaitGroup
	var inside, writers int32
	var mu sync.Mutex
	for i := range 6 {
		m := open()
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			o := dsync.WithOwner(wctx)
			if i%3 == 0 {
				if err := m.LockContext(o); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if inside != 0 || writers != 0 {
					t.Errorf("writer with %d readers, %d writers", inside, writers)
				}
				writers++
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				writers--
				mu.Unlock()
				if err := m.UnlockContext(o); err != nil {
					t.Error(err)
				}
				return
			}
			if err := m.RLockContext(o); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			if writers != 0 {
				t.Errorf("reader with a writer")
			}
			inside++
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			if err := m.RUnlockContext(o); err != nil {
				t.Error(err)
			}
		})
	}
	await(t, ctx, x, "waiters", func(s rwlock.State) bool { return s.WaitingReaders+s.WaitingWriters >= 5 })
	if err := srv.FlushScripts(ctx); err != nil {
		t.Fatal(err)
	}
	go srv.Pause(ctx, 500*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	x.Unlock()
	wg.Wait()
	if st := state(t, ctx, x); st.Mode != rwlock.Free || st.WaitingReaders+st.WaitingWriters != 0 {
		t.Errorf("at the end: %+v", st)
	}
	if bad := keysLeft(t, srv, p); len(bad) > 0 {
		t.Errorf("keys left: %v", bad)
	}
}
