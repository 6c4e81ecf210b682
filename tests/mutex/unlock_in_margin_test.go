package mutex_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// cutOff fails every renewal call while renew is set, and every release
// call while release is set, before it is sent, as a path that drops them
// would; other scripts pass.
type cutOff struct {
	backend.Backend
	renew, release atomic.Bool
}

var errCutOff = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")

func (c *cutOff) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	src := "\n" + s.Source()
	if c.renew.Load() && strings.Contains(src, "\n-- renew:") || c.release.Load() && strings.Contains(src, "\n-- release:") {
		return nil, errCutOff
	}
	return c.Backend.Eval(ctx, s, keys, args...)
}

// marginRig is a mutex on a watchdog lease with a wide expiry margin,
// through a backend that can cut its renewals and releases off, and a
// rival on a backend of its own.
type marginRig struct {
	m, rival *mutex.Mutex
	c        *cutOff
}

const (
	marginLease = 1200 * time.Millisecond
	marginWidth = 500 * time.Millisecond
)

func newMarginRig(t *testing.T, name string) marginRig {
	srv := testserver.Real(t)
	c := &cutOff{Backend: srv.NewBackend(t)}
	return marginRig{
		m:     mutex.New(c, name, mutex.WithWatchdog(marginLease), mutex.WithExpiryMargin(marginWidth), mutex.WithLogger(nil)),
		rival: mutex.New(srv.NewBackend(t), name),
		c:     c,
	}
}

// lockTwice takes two reentrant holds for o and returns when the first
// was sent.
func (r marginRig) lockTwice(t *testing.T, o context.Context) time.Time {
	acquired := time.Now()
	for range 2 {
		if err := r.m.LockContext(o); err != nil {
			t.Fatal(err)
		}
	}
	return acquired
}

// awaitLoss waits for the hold's lease to end here and returns when the
// server expires it, skipping the test if too little of the margin is
// left to act in.
func (r marginRig) awaitLoss(t *testing.T, o context.Context, acquired time.Time) time.Time {
	select {
	case <-r.m.Done(o):
	case <-time.After(marginLease):
		t.Fatal("the hold's lease did not end with every renewal failing")
	}
	r.c.renew.Store(false)
	r.c.release.Store(false)
	serverExpiry := acquired.Add(marginLease)
	if time.Until(serverExpiry) < marginWidth/3 {
		t.Skipf("Done came %v after the acquisition, too late in the margin to act in it", time.Since(acquired))
	}
	return serverExpiry
}

// freeAfter checks that the rival takes the mutex just past serverExpiry:
// what was left of the lost hold expired when the server was to expire it.
func (r marginRig) freeAfter(t *testing.T, ctx context.Context, acquired, serverExpiry time.Time, how string) {
	time.Sleep(time.Until(serverExpiry.Add(50 * time.Millisecond)))
	ro := dsync.WithOwner(ctx)
	ok, err := r.rival.TryLockContext(ro)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		st, _ := r.rival.State(ro)
		t.Fatalf("%v after the acquisition (lease %v), the lost hold still keeps the mutex: %+v; %s extended it", time.Since(acquired).Round(time.Millisecond), marginLease, st, how)
	}
	if err := r.rival.UnlockContext(ro); err != nil {
		t.Fatal(err)
	}
}

// An unlock of one of two reentrant holds whose lease ended here (its
// renewals failed until the deadline) but which the server still keeps
// (the expiry margin) undoes that hold, and leaves the other to expire
// when the server was to expire it: it must not restore the watchdog's
// lease to a hold nobody renews any more, which its holder was told is
// lost, and which would keep the mutex from everyone for one more lease.
func TestUnlockInMarginDoesNotExtendLostHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := newMarginRig(t, "margin-"+dsync.NewID()[:8])
	o := dsync.WithOwner(ctx)
	r.c.renew.Store(true)
	acquired := r.lockTwice(t, o)
	serverExpiry := r.awaitLoss(t, o, acquired)
	if err := r.m.UnlockContext(o); err != nil {
		t.Fatalf("UnlockContext in the margin: %v", err)
	}
	r.freeAfter(t, ctx, acquired, serverExpiry, "the unlock in the margin")
}

// An unlock of one of two reentrant holds, cut off by a partition, goes
// on in the background; the partition outlasts the lease here (Done),
// and heals within the margin before the server's expiry, where a retry
// of the unlock lands: it undoes its hold and leaves the other to expire
// when the server was to expire it, not one lease later, though the
// unlock began while the lease was live.
func TestUnlockRetriedInMarginDoesNotExtendLostHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := newMarginRig(t, "rmargin-"+dsync.NewID()[:8])
	o := dsync.WithOwner(ctx)
	acquired := r.lockTwice(t, o)
	r.c.renew.Store(true)
	r.c.release.Store(true)
	dctx, dcancel := context.WithTimeout(o, 100*time.Millisecond)
	err := r.m.UnlockContext(dctx)
	dcancel()
	t.Logf("the unlock cut off: %v", err)
	serverExpiry := r.awaitLoss(t, o, acquired)
	r.freeAfter(t, ctx, acquired, serverExpiry, "the retried unlock")
}
