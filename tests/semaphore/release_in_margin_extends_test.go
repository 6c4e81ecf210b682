package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/semaphore"
)

// unrenewed fails every renewal call while cut is set, before it is
// sent, as a path that drops them would; other scripts pass.
type unrenewed struct {
	backend.Backend
	cut atomic.Bool
}

func (u *unrenewed) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if u.cut.Load() && strings.Contains("\n"+s.Source(), "\n-- renew:") {
		return nil, errNet
	}
	return u.Backend.Eval(ctx, s, keys, args...)
}

// A partial release of permits whose lease ended here (renewals failed
// until the deadline) but which the server still holds (the expiry
// margin) gives its share back, and leaves the rest to expire when the
// server was to expire it: it must not restore the watchdog's lease to
// permits nobody renews any more, which the holder was told are lost,
// and which would keep them from everyone for one more lease.
func TestReleaseInMarginDoesNotExtendLostPermits(t *testing.T) {
	for kind, newBackend := range servers(t) {
		t.Run(kind, func(t *testing.T) {
			const (
				lease  = 1200 * time.Millisecond
				margin = 500 * time.Millisecond
			)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			name := "margin-" + dsync.NewID()[:8]
			u := &unrenewed{Backend: newBackend()}
			s := semaphore.New(u, name, 4, semaphore.WithWatchdog(lease), semaphore.WithExpiryMargin(margin), semaphore.WithLogger(nil))
			probe := semaphore.New(newBackend(), name, 4)
			u.cut.Store(true)
			acquired := time.Now()
			if err := s.Acquire(ctx, 3); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.Done(ctx):
			case <-time.After(lease):
				t.Fatal("the permits' lease did not end with every renewal failing")
			}
			u.cut.Store(false)
			serverExpiry := acquired.Add(lease)
			if time.Until(serverExpiry) < margin/3 {
				t.Skipf("Done came %v after the acquisition, too late in the margin to release in it", time.Since(acquired))
			}
			// In the margin: the server still holds them, the release finds them.
			if err := s.Release(ctx, 1); err != nil {
				t.Fatalf("Release(1) in the margin: %v", err)
			}
			if st, err := probe.State(ctx); err != nil || st.Held != 2 {
				t.Fatalf("after Release(1) in the margin: %+v, %v; want the other 2 still held", st, err)
			}
			// Past the server's expiry as it was before the release.
			time.Sleep(time.Until(serverExpiry.Add(50 * time.Millisecond)))
			st, err := probe.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Held != 0 {
				t.Errorf("%v after the acquisition (lease %v), the lost permits are still held: %+v; the release in the margin extended them", time.Since(acquired).Round(time.Millisecond), lease, st)
			}
			if err := s.Release(ctx, 2); !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("Release(2) of the lost permits past the server's expiry: %v, want ErrNotHeld", err)
			}
		})
	}
}
