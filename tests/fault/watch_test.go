package fault

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Guard (passes on defects): a lease scheduler that retires stops its
// Watch, and the watch channel is unsubscribed after the hub's linger; a
// scheduler re-created and retired again leaves nothing subscribed either.
func TestWatchRetires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		b := fake.FakeBackend(t, srv)
		for round := range 3 {
			m := mutex.New(b, "retire", mutex.WithLease(time.Second), mutex.WithLogger(nil))
			ctx := dsync.WithOwner(context.Background())
			if err := m.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if ch := srv.PubSubChannels("dsync-watch*"); len(ch) != 1 {
				t.Errorf("round %d, while held: watch channels %v; want one", round, ch)
			}
			if err := m.UnlockContext(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Second) // idle retire and linger: a second each
			synctest.Wait()
			if ch := srv.PubSubChannels("*"); len(ch) != 0 {
				t.Errorf("round %d, retired: channels %v still subscribed; want none", round, ch)
			}
		}
	})
}

// Guard (passes on defects): the lease-0 check that a reconnection of the
// pub/sub connection triggers for fixed leases neither deletes, shortens
// nor extends any hold: mutex, fairlock, rwlock read and write holds and a
// semaphore permit stay held, their Done open, until the lease ends, and
// all are free shortly after it.
func TestReconnectCheckChangesNothing(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv.Addr())
	const lease = 1500 * time.Millisecond
	bg := context.Background()
	mu := mutex.New(b, "chk-m", mutex.WithLease(lease), mutex.WithLogger(nil))
	fl := fairlock.New(b, "chk-f", fairlock.WithLease(lease), fairlock.WithLogger(nil))
	rr := rwlock.New(b, "chk-r", rwlock.WithLease(lease), rwlock.WithLogger(nil))
	rw := rwlock.New(b, "chk-w", rwlock.WithLease(lease), rwlock.WithLogger(nil))
	se := semaphore.New(b, "chk-s", 2, semaphore.WithLease(lease), semaphore.WithLogger(nil))
	ctx := dsync.WithOwner(bg)
	start := time.Now()
	for _, err := range []error{mu.LockContext(ctx), fl.LockContext(ctx), rr.RLockContext(ctx), rw.LockContext(ctx), se.Acquire(ctx, 1)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	dones := []<-chan struct{}{mu.Done(ctx), fl.Done(ctx), rr.RDone(ctx), rw.Done(ctx), se.Done(ctx)}
	ttl0, _ := mu.State(bg)
	if _, err := do(bg, srv.Addr(), "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatal(err)
	}
	// Wait for the watch channel to be subscribed again, then for the
	// check and its quick rechecks (8 × 5 ms).
	for i := 0; ; i++ {
		r, err := do(bg, srv.Addr(), "PUBSUB", "CHANNELS", "dsync-watch*")
		if l, ok := r.([]any); err == nil && ok && len(l) > 0 {
			break
		}
		if i == 200 {
			t.Fatal("the watch channel was not subscribed again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	if time.Since(start) > lease/2 {
		t.Skip("too slow a machine to tell")
	}
	for i, d := range dones {
		select {
		case <-d:
			t.Errorf("hold %d: Done closed by the check", i)
		default:
		}
	}
	ttl1, err := mu.State(bg)
	if err != nil || !ttl1.Locked || ttl1.TTL > ttl0.TTL {
		t.Errorf("mutex after the check: %+v, %v; want held, TTL ≤ %v", ttl1, err, ttl0.TTL)
	}
	if ok, err := fl.IsLocked(bg); err != nil || !ok {
		t.Errorf("fairlock after the check: %v, %v; want held", ok, err)
	}
	if st, err := rr.State(bg); err != nil || st.Readers != 1 {
		t.Errorf("rwlock read after the check: %+v, %v; want one reader", st, err)
	}
	if st, err := rw.State(bg); err != nil || st.WriterCount != 1 || st.TTL > lease {
		t.Errorf("rwlock write after the check: %+v, %v; want held", st, err)
	}
	if n, err := se.Available(bg); err != nil || n != 1 {
		t.Errorf("semaphore after the check: %d available, %v; want 1", n, err)
	}
	// Not extended: all free soon after the lease ends.
	time.Sleep(time.Until(start.Add(lease + 100*time.Millisecond)))
	if s, err := mu.State(bg); err != nil || s.Locked {
		t.Errorf("mutex after its lease: %+v, %v; want free", s, err)
	}
	if ok, err := fl.IsLocked(bg); err != nil || ok {
		t.Errorf("fairlock after its lease: %v, %v; want free", ok, err)
	}
	if st, err := rr.State(bg); err != nil || st.Readers != 0 {
		t.Errorf("rwlock read after its lease: %+v, %v; want free", st, err)
	}
	if st, err := rw.State(bg); err != nil || st.WriterCount != 0 {
		t.Errorf("rwlock write after its lease: %+v, %v; want free", st, err)
	}
	if n, err := se.Available(bg); err != nil || n != 2 {
		t.Errorf("semaphore after its lease: %d available, %v; want 2", n, err)
	}
}
