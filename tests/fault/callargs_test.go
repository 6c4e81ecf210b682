package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/wait"
	"github.com/dsyncgo/dsync/mutex"
)

// lingering is a backend whose failed calls go on reading their arguments
// after Eval returned, as a pipelining client does: its writer may encode
// a queued call whose caller has left, or still hold it when a reply
// never comes. Package backend allows it (see Backend.Eval), so dsync
// must never write a call's keys or args once the call is made.
type lingering struct {
	backend.Backend

	failing atomic.Int64 // the next calls to fail, with a transport error
	readers sync.WaitGroup
}

func (l *lingering) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if l.failing.Add(-1) < 0 {
		l.failing.Store(0)
		return l.Backend.Eval(ctx, s, keys, args...)
	}
	l.readers.Add(1)
	go func() {
		defer l.readers.Done()
		// The race detector reports a write by dsync to the call's
		// memory that is not ordered after these reads, whenever it
		// happens.
		for range 20 {
			_, _ = ctx.Deadline()
			_ = fmt.Sprint(keys, args)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return nil, backend.TransportError(ctx, "lingering", io.ErrUnexpectedEOF)
}

// A call that failed may still be read by the backend: neither a retried
// acquisition nor a retried release (which marks its lease gone in its
// arguments once the lease ended) writes the context or the arguments of
// the call before it. Under -race, a write to them is a reported data
// race.
func TestFailedCallArgsUntouched(t *testing.T) {
	srv := startServer(t)
	b := &lingering{Backend: newBackend(t, srv.Addr())}
	t.Cleanup(b.readers.Wait)
	const lease = 200 * time.Millisecond
	m := mutex.New(b, "callargs", mutex.WithLease(lease), mutex.WithLogger(nil))
	ctx := dsync.WithOwner(context.Background())

	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b.failing.Store(3) // the acquisition retries past these
	if err := m.LockContext(lctx); err != nil {
		t.Fatalf("Lock after 3 failed attempts: %v", err)
	}
	if n := b.failing.Load(); n != 0 {
		t.Fatalf("%d failing calls left; want the acquisition to have retried past all of them", n)
	}

	// Every release attempt fails until the lease has ended: the later
	// ones mark it ended.
	b.failing.Store(1 << 20)
	uctx, cancel := context.WithTimeout(ctx, 2*lease)
	defer cancel()
	start := time.Now()
	err := m.UnlockContext(uctx)
	if err == nil {
		t.Fatal("Unlock succeeded with every release call failing")
	}
	wait.Settle()
	b.failing.Store(0)
	if took := time.Since(start); took < lease/2 {
		t.Fatalf("the release gave up after %v, before the lease (%v) could end: the case tests nothing", took, lease)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Unlock: %v; want the transport error or the deadline", err)
	}
	// The hold expired by itself on the server.
	time.Sleep(lease)
	checkFree(t, m)
}
