package mutex_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// chaos disturbs srv until stop closes: SCRIPT FLUSH, CLIENT KILL of
// pub/sub connections and of ordinary ones (replies lost mid-call), each
// every few tens of ms.
func chaos(srv *testserver.Server, stop <-chan struct{}) {
	bg := context.Background()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+i%3*15) * time.Millisecond):
		}
		switch i % 4 {
		case 0:
			srv.FlushScripts(bg)
		case 1:
			srv.KillPubSub(bg)
		case 2:
			srv.Do(bg, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
		case 3:
			srv.FlushScripts(bg)
			srv.KillPubSub(bg)
		}
	}
}

// TestChaosMutualExclusion: several backend values (processes), owned
// and ownerless holds, re-entry, TryLock, short LockContext deadlines
// (abandons), unlocks through another handle of the same owner, all under
// SCRIPT FLUSH and killed connections for 5s. No two holders may be inside
// at once unless one of them was told of a loss, and tokens increase.
func TestChaosMutualExclusion(t *testing.T) {
	srv := testserver.Real(t)
	name := uniqueName("chaos")
	const workers = 8
	bs := make([]backend.Backend, 4)
	for i := range bs {
		bs[i] = srv.NewBackend(t, bredigo.WithTimeout(2*time.Second))
	}
	var (
		inside     atomic.Int32
		violations atomic.Int32
		losses     atomic.Int32
		acquired   atomic.Int32
		mu         sync.Mutex
		tokens     []int64
		errs       []string
	)
	stop := make(chan struct{})
	chaosDone := make(chan struct{})
	go func() { defer close(chaosDone); chaos(srv, stop) }()
	deadline := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := mutex.New(bs[w%len(bs)], name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
			// A second handle on the same backend value: a hold is
			// released through the backend value that took it.
			m2 := mutex.New(bs[w%len(bs)], name, mutex.WithWatchdog(3*time.Second), mutex.WithLogger(nil))
			for i := 0; time.Now().Before(deadline); i++ {
				owned := w%2 == 0
				ctx := context.Background()
				if owned {
					ctx = dsync.WithOwner(ctx)
				}
				var err error
				switch i % 3 {
				case 0:
					lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					err = m.LockContext(lctx)
					cancel()
				case 1:
					var ok bool
					ok, err = m.TryLockContext(ctx)
					if err == nil && !ok {
						time.Sleep(time.Millisecond)
						continue
					}
				default:
					err = m.LockContext(ctx)
				}
				if err != nil {
					continue
				}
				acquired.Add(1)
				done := m.Done(ctx)
				tok, terr := m.Token(ctx)
				if n := inside.Add(1); n != 1 {
					violations.Add(1)
					mu.Lock()
					errs = append(errs, fmt.Sprintf("worker %d entered with %d inside (token %d)", w, n-1, tok))
					mu.Unlock()
				}
				if terr == nil {
					mu.Lock()
					tokens = append(tokens, tok)
					mu.Unlock()
				}
				if owned && i%2 == 0 {
					m.LockContext(ctx) // re-entry
					m2.UnlockContext(ctx)
				}
				time.Sleep(time.Duration(i%3) * time.Millisecond)
				select {
				case <-done:
					losses.Add(1)
				default:
				}
				inside.Add(-1)
				if owned && i%4 == 0 {
					m2.UnlockContext(ctx)
				} else if owned {
					m.UnlockContext(ctx)
				} else {
					m.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-chaosDone
	t.Logf("%d acquisitions, %d holds lost", acquired.Load(), losses.Load())
	if v := violations.Load(); v > 0 && losses.Load() == 0 {
		t.Errorf("%d mutual exclusion violations with no loss signalled: %v", v, errs)
	} else if v > 0 {
		t.Logf("%d overlaps, %d losses signalled: %v", v, losses.Load(), errs)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("token %d after %d (hold %d)", tokens[i], tokens[i-1], i)
		}
	}
	// Nothing left behind: the mutex is free within a lease.
	probe := mutex.New(srv.NewBackend(t), name)
	free := false
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if locked, err := probe.IsLocked(context.Background()); err == nil && !locked {
			free = true
			break
		}
	}
	if !free {
		s, _ := probe.State(context.Background())
		t.Errorf("mutex still held 5s after every worker stopped: %+v", s)
	}
}
