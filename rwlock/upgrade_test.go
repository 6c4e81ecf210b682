package rwlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// The server refuses an upgrade too, at once, for a reader the process
// does not know of (its owner id used by another process, say).
func TestServerRefusesUpgrade(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 5*time.Second)
	defer cancel()
	m := New(srv.NewBackend(t), "up", WithPrefix("rwtest:"+dsync.NewID()[:8]))
	if err := m.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Past the local check, straight to the acquisition.
	err := m.h.Lock(ctx, m.spec(core.Exclusive))
	if !errors.Is(err, dsync.ErrUpgrade) {
		t.Errorf("write acquisition by a reader: %v, want ErrUpgrade", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the refusal took %v; it must not wait", d)
	}
	if st, err := m.State(ctx); err != nil || st.ReadCount != 1 || st.WaitingWriters != 0 || st.Mode != Read {
		t.Errorf("after the refusal: %+v, %v; want the read hold alone, nothing queued", st, err)
	}
	if err := m.RUnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
}
