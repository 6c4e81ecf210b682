package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

func permitSem(t *testing.T, srv *testserver.Server, p string, capacity int64, opts ...semaphore.Option) *semaphore.Semaphore {
	return semaphore.New(srv.NewBackend(t), "permits", capacity, append([]semaphore.Option{semaphore.WithPrefix(p), semaphore.WithLogger(nil)}, opts...)...)
}

// A permit acquired through one backend value is released by its id
// through another, which knows nothing else of it; a second release of the
// same id is ErrNotHeld and changes nothing.
func TestPermitReleasedByIDElsewhere(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := "permit:" + dsync.NewID()[:8]
	admit, finish := permitSem(t, srv, p, 2), permitSem(t, srv, p, 2)
	a, err := admit.AcquirePermit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := admit.AcquirePermit(dsync.WithOwner(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || len(a.ID) != 32 || time.Until(a.Expires) < 29*time.Second {
		t.Fatalf("permits %+v and %+v", a, b)
	}
	if st, _ := finish.State(ctx); st.Held != 2 || st.Holders != 2 {
		t.Fatalf("state %+v, want 2 permits of 2 holders", st)
	}
	if err := finish.ReleasePermit(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := finish.ReleasePermit(ctx, a.ID); !errors.Is(err, dsync.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	if st, _ := finish.State(ctx); st.Held != 1 {
		t.Fatalf("state %+v after a release and a refused one, want 1 permit held", st)
	}
	if err := admit.ReleasePermit(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if ks := keysUnder(t, srv, p); len(ks) != 0 {
		t.Errorf("keys left: %v", ks)
	}
}

// Portable permits and owners' permits share one capacity: with 2 of 3
// held by an owner, one permit fits and a further one waits until the
// owner gives one back; the freed permit is handed to it with a whole
// lease.
func TestPermitSharesCapacity(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := "permit:" + dsync.NewID()[:8]
	s := permitSem(t, srv, p, 3, semaphore.WithLease(2*time.Second))
	owner := dsync.WithOwner(ctx)
	if err := s.Acquire(owner, 2); err != nil {
		t.Fatal(err)
	}
	first, err := s.AcquirePermit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan semaphore.Permit, 1)
	go func() {
		p, err := permitSem(t, srv, p, 3, semaphore.WithLease(2*time.Second)).AcquirePermit(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	probe := permitSem(t, srv, p, 3)
	for i := 0; ; i++ {
		if st, _ := probe.State(ctx); st.Queued == 1 {
			break
		}
		if i == 5000 {
			t.Fatal("the second permit is not queued")
		}
		time.Sleep(time.Millisecond)
	}
	if ok, err := s.TryAcquire(dsync.WithOwner(ctx), 1); ok || err != nil {
		t.Fatalf("TryAcquire with 3 of 3 held: %v, %v", ok, err)
	}
	released := time.Now()
	if err := s.Release(owner, 1); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if d := time.Since(released); d > 500*time.Millisecond {
		t.Errorf("the freed permit reached the waiter %v after the release", d)
	}
	if left := time.Until(second.Expires); left < 1500*time.Millisecond {
		t.Errorf("a permit handed to a waiter has %v of its 2s lease", left)
	}
	for _, id := range []string{first.ID, second.ID} {
		if err := probe.ReleasePermit(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Release(owner, 1); err != nil {
		t.Fatal(err)
	}
}

// A permit whose lease runs out is returned by itself, and its release is
// then ErrNotHeld; an extended permit outlives its first lease.
func TestPermitLease(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := "permit:" + dsync.NewID()[:8]
	const lease = 300 * time.Millisecond
	s := permitSem(t, srv, p, 2, semaphore.WithLease(lease))
	lapsed, err := s.AcquirePermit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	extended, err := s.AcquirePermit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := permitSem(t, srv, p, 2).ExtendPermit(ctx, extended.ID, 3*lease); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lease + 100*time.Millisecond) // the first lease runs out: time is what is tested
	if st, _ := s.State(ctx); st.Held != 1 {
		t.Errorf("state %+v past the first lease, want the extended permit held", st)
	}
	if err := s.ReleasePermit(ctx, lapsed.ID); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("release of a lapsed permit: %v, want ErrNotHeld", err)
	}
	if err := s.ExtendPermit(ctx, lapsed.ID, lease); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("extension of a lapsed permit: %v, want ErrNotHeld", err)
	}
	if err := s.ReleasePermit(ctx, extended.ID); err != nil {
		t.Errorf("release of the extended permit past its first lease: %v", err)
	}
}

func TestPermitBadInputWithoutIO(t *testing.T) {
	var calls atomic.Int64
	s := semaphore.New(&countingBackend{&calls}, "s", 2)
	ctx := context.Background()
	for _, id := range []string{"", "x", dsync.NewID()[:31], "ABCDEF0123456789ABCDEF0123456789", dsync.NewID() + "0"} {
		if err := s.ReleasePermit(ctx, id); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("ReleasePermit(%q): %v, want ErrNotHeld", id, err)
		}
		if err := s.ExtendPermit(ctx, id, time.Second); !errors.Is(err, dsync.ErrNotHeld) {
			t.Errorf("ExtendPermit(%q): %v, want ErrNotHeld", id, err)
		}
	}
	if err := s.ExtendPermit(ctx, dsync.NewID(), 0); !errors.Is(err, dsync.ErrInvalidLease) {
		t.Errorf("ExtendPermit with no lease: %v, want ErrInvalidLease", err)
	}
	if _, err := semaphore.New(&countingBackend{&calls}, "s", 0).AcquirePermit(ctx); !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("AcquirePermit with capacity 0: %v, want ErrInvalidPermits", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls to the backend", n)
	}
}
