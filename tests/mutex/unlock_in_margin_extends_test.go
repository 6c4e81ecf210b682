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

// unrenewed fails every renewal call while cut is set, before it is
// sent, as a path that drops them would; other scripts pass.
type unrenewed struct {
	backend.Backend
	cut atomic.Bool
}

var errUnrenewed = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")

func (u *unrenewed) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if u.cut.Load() && strings.Contains("\n"+s.Source(), "\n-- renew:") {
		return nil, errUnrenewed
	}
	return u.Backend.Eval(ctx, s, keys, args...)
}

// An unlock of one of two reentrant holds whose lease ended here (its
// renewals failed until the deadline) but which the server still keeps
// (the expiry margin) undoes that hold, and leaves the other to expire
// when the server was to expire it: it must not restore the watchdog's
// lease to a hold nobody renews any more, which its holder was told is
// lost, and which would keep the mutex from everyone for one more lease.
func TestUnlockInMarginDoesNotExtendLostHold(t *testing.T) {
	srv := testserver.Real(t)
	const (
		lease  = 1200 * time.Millisecond
		margin = 500 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "margin-" + dsync.NewID()[:8]
	u := &unrenewed{Backend: srv.NewBackend(t)}
	m := mutex.New(u, name, mutex.WithWatchdog(lease), mutex.WithExpiryMargin(margin), mutex.WithLogger(nil))
	rival := mutex.New(srv.NewBackend(t), name)
	o := dsync.WithOwner(ctx)
	u.cut.Store(true)
	acquired := time.Now()
	for range 2 {
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-m.Done(o):
	case <-time.After(lease):
		t.Fatal("the hold's lease did not end with every renewal failing")
	}
	u.cut.Store(false)
	serverExpiry := acquired.Add(lease)
	if time.Until(serverExpiry) < margin/3 {
		t.Skipf("Done came %v after the acquisition, too late in the margin to unlock in it", time.Since(acquired))
	}
	if err := m.UnlockContext(o); err != nil {
		t.Fatalf("UnlockContext in the margin: %v", err)
	}
	time.Sleep(time.Until(serverExpiry.Add(50 * time.Millisecond)))
	ro := dsync.WithOwner(ctx)
	ok, err := rival.TryLockContext(ro)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		st, _ := rival.State(ro)
		t.Errorf("%v after the acquisition (lease %v), the lost hold still keeps the mutex: %+v; the unlock in the margin extended it", time.Since(acquired).Round(time.Millisecond), lease, st)
		return
	}
	if err := rival.UnlockContext(ro); err != nil {
		t.Fatal(err)
	}
}
