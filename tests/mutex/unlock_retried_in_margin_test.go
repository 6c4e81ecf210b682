package mutex_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// cutOff fails every renewal and release call while cut is set, before
// it is sent, as a partition would; other scripts pass.
type cutOff struct {
	backend.Backend
	cut atomic.Bool
}

func (c *cutOff) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	src := "\n" + s.Source()
	if c.cut.Load() && (strings.Contains(src, "\n-- renew:") || strings.Contains(src, "\n-- release:")) {
		return nil, errUnrenewed
	}
	return c.Backend.Eval(ctx, s, keys, args...)
}

// An unlock of one of two reentrant holds, cut off by a partition, goes
// on in the background; the partition outlasts the lease here (Done),
// and heals within the margin before the server's expiry, where a retry
// of the unlock lands: it undoes its hold and leaves the other to expire
// when the server was to expire it, not one lease later, though the
// unlock began while the lease was live.
func TestUnlockRetriedInMarginDoesNotExtendLostHold(t *testing.T) {
	srv := testserver.Real(t)
	const (
		lease  = 1200 * time.Millisecond
		margin = 500 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "rmargin-" + dsync.NewID()[:8]
	c := &cutOff{Backend: srv.NewBackend(t)}
	m := mutex.New(c, name, mutex.WithWatchdog(lease), mutex.WithExpiryMargin(margin), mutex.WithLogger(nil))
	rival := mutex.New(srv.NewBackend(t), name)
	o := dsync.WithOwner(ctx)
	acquired := time.Now()
	for range 2 {
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
	}
	c.cut.Store(true)
	dctx, dcancel := context.WithTimeout(o, 100*time.Millisecond)
	err := m.UnlockContext(dctx)
	dcancel()
	t.Logf("the unlock cut off: %v", err)
	select {
	case <-m.Done(o):
	case <-time.After(lease):
		t.Fatal("the hold's lease did not end with every renewal failing")
	}
	c.cut.Store(false)
	serverExpiry := acquired.Add(lease)
	if time.Until(serverExpiry) < margin/3 {
		t.Skipf("Done came %v after the acquisition, too late in the margin to heal in it", time.Since(acquired))
	}
	time.Sleep(time.Until(serverExpiry.Add(50 * time.Millisecond)))
	ro := dsync.WithOwner(ctx)
	ok, err := rival.TryLockContext(ro)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		st, _ := rival.State(ro)
		t.Fatalf("%v after the acquisition (lease %v), the lost hold still keeps the mutex: %+v; the retried unlock extended it", time.Since(acquired).Round(time.Millisecond), lease, st)
	}
	if err := rival.UnlockContext(ro); err != nil {
		t.Fatal(err)
	}
}
