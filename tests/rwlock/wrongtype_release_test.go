package rwlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// TestWriteReleaseFailsMidway: ":rexpiry" is turned into a string
// while a writer holds and readers (in "another process", woken through
// pub/sub) and a writer wait. The write release frees the write key, then
// fails in pass_on (purge_readers) with WRONGTYPE: no rollback, so the
// write hold is gone and nobody was handed the lock. The release reports
// ErrUnexpectedReply, Done closes. Once the key is deleted, every waiter
// gets in (by its heartbeat) with no two holders at once, nothing is
// granted twice, and the lock ends free with no key left.
func TestWriteReleaseFailsMidway(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	const wt = 600 * time.Millisecond // heartbeat 200ms
	open := func() *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), "mid", rwlock.WithPrefix(p), rwlock.WithLogger(nil), rwlock.WithWaiterTimeout(wt))
	}
	x := rwlock.New(elsewhere{srv.NewBackend(t)}, "mid", rwlock.WithPrefix(p), rwlock.WithLogger(nil), rwlock.WithWaiterTimeout(wt))
	probe := open()
	ox := dsync.WithOwner(ctx)
	if err := x.LockContext(ox); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var readers, writers int
	var errs atomic.Int32
	var wg sync.WaitGroup
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	run := func(write bool) {
		m := open()
		wg.Go(func() {
			o := dsync.WithOwner(wctx)
			var err error
			if write {
				err = m.LockContext(o)
			} else {
				err = m.RLockContext(o)
			}
			if err != nil {
				if !errors.Is(err, dsync.ErrUnexpectedReply) {
					t.Errorf("waiter (write %v): %v", write, err)
				}
				errs.Add(1)
				return
			}
			mu.Lock()
			if writers != 0 || (write && readers != 0) {
				t.Errorf("two holders: write %v in with %d writers, %d readers", write, writers, readers)
			}
			if write {
				writers++
			} else {
				readers++
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			if write {
				writers--
			} else {
				readers--
			}
			mu.Unlock()
			if write {
				err = m.UnlockContext(o)
			} else {
				err = m.RUnlockContext(o)
			}
			if err != nil {
				t.Errorf("release (write %v): %v", write, err)
			}
		})
	}
	for range 3 {
		run(false)
	}
	await(t, ctx, probe, "readers waiting", func(s rwlock.State) bool { return s.WaitingReaders == 3 })
	run(true)
	await(t, ctx, probe, "writer queued", func(s rwlock.State) bool { return s.WaitingWriters == 1 })
	k := key(p, "mid") + ":rexpiry"
	srv.Do(ctx, "SET", k, "garbage")
	err := x.UnlockContext(ox)
	if !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Errorf("the write release with %s a string = %v; want ErrUnexpectedReply", k, err)
	}
	select {
	case <-x.Done(ox):
	default:
		t.Errorf("Done is open after a failed write release")
	}
	v, _ := redis.String(srv.Do(ctx, "GET", key(p, "mid")))
	w, _ := redis.Int(srv.Do(ctx, "ZCARD", key(p, "mid")+":rwait"))
	q, _ := redis.Int(srv.Do(ctx, "ZCARD", key(p, "mid")+":wqueue"))
	t.Logf("left by the failed release: write key %q, %d readers registered, %d writers queued", v, w, q)
	if !strings.HasSuffix(v, " free") && v != "" {
		t.Logf("the write hold is still there after the failed release")
	}
	srv.Do(ctx, "DEL", k)
	wg.Wait()
	t.Logf("%d waiters failed with ErrUnexpectedReply", errs.Load())
	await(t, ctx, probe, "free at the end", func(s rwlock.State) bool {
		return s.Mode == rwlock.Free && s.WaitingReaders == 0 && s.WaitingWriters == 0
	})
	lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
	defer lcancel()
	if err := probe.LockContext(lctx); err != nil {
		t.Fatalf("Lock after repair: %v", err)
	}
	probe.Unlock()
	if bad := keysLeft(t, srv, p); len(bad) > 0 {
		t.Errorf("keys left: %v", bad)
	}
}
