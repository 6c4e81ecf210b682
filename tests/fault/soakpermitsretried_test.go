package fault

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// failFirst fails the first call it is told to, as a connection reset
// would: before sending it (lost), or after it ran (applied, its reply
// lost).
type failFirst struct {
	backend.Backend
	fail    atomic.Bool
	applied bool
}

func (b *failFirst) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if !b.fail.CompareAndSwap(true, false) {
		return b.Backend.Eval(ctx, s, keys, args...)
	}
	if b.applied {
		b.Backend.Eval(ctx, s, keys, args...)
	}
	return nil, errors.New("connection reset by peer")
}

// The permits soak's release by id notes a release whose nil came after a
// failed attempt, whether that attempt was lost or applied, and only such
// a release: its checker takes the others' nil as the permit's being
// there (see checkPermitsGroup).
func TestSoakPermitsReleaseNotesFailedAttempt(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := semaphore.New(b, "noted", 3, semaphore.WithLease(time.Minute), semaphore.WithLogger(nil))
	ff := &failFirst{Backend: b}
	byID := semaphore.New(&attemptNoting{ff}, "noted", 3, semaphore.WithLease(time.Minute), semaphore.WithLogger(nil))
	for _, c := range []struct {
		name          string
		fail, applied bool
	}{{"answered at once", false, false}, {"first attempt lost", true, false}, {"first attempt applied", true, true}} {
		p, err := s.AcquirePermit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ff.applied = c.applied
		ff.fail.Store(c.fail)
		failed := new(atomic.Bool)
		if err := byID.ReleasePermit(context.WithValue(ctx, failedAttempt{}, failed), p.ID); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if failed.Load() != c.fail {
			t.Errorf("%s: noted a failed attempt %v, want %v", c.name, failed.Load(), c.fail)
		}
	}
}
