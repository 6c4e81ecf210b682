package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
)

// Readers whose read holds were lost with the lock's main key (deleted,
// or evicted) stay lost when a lone reader's plain hold is later unfolded
// into the readers' keys: their entries, left behind there, do not come
// back to life. Readers X and Y hold; the main key is deleted; a plain
// writer takes the lock and lets go (its SET NX and its release never
// read the readers' keys); a lone reader takes it with a plain SET NX,
// and a second reader's acquisition unfolds that hold into the readers'
// keys. X and Y must be told of their loss at their next renewal, and
// their releases fail with ErrNotHeld: the writer held the lock while
// they thought they read.
func TestLostReadersNotRevivedByUnfold(t *testing.T) {
	srv := testserver.Real(t)
	// A long lease, so that every step is done before the lost readers'
	// first renewal, a third of it in.
	const lease = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, open, lost := lostReaders(t, ctx, srv, "unfold", lease)
	x, xo, y, yo := lost[0].m, lost[0].o, lost[1].m, lost[1].o
	z, l, m := open(), open(), open()
	zo := dsync.WithOwner(ctx)
	if err := z.LockContext(zo); err != nil {
		t.Fatal(err)
	}
	if err := z.UnlockContext(zo); err != nil {
		t.Fatal(err)
	}
	lo, mo := dsync.WithOwner(ctx), dsync.WithOwner(ctx)
	if err := l.RLockContext(lo); err != nil {
		t.Fatal(err)
	}
	if err := m.RLockContext(mo); err != nil {
		t.Fatal(err)
	}
	st, err := m.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > lease/3 {
		t.Skipf("the steps took %v, past the lost readers' first renewal: the case did not happen", d)
	}
	if st.Readers != 2 {
		t.Errorf("after the unfold the lock counts %d readers; want 2 (L and M), the lost X and Y not among them", st.Readers)
	}
	for i, done := range []<-chan struct{}{x.RDone(xo), y.RDone(yo)} {
		select {
		case <-done:
		case <-time.After(time.Until(start.Add(lease))):
			t.Errorf("lost reader %d not told within its lease, though a writer held the lock after its hold was lost", i+1)
		}
	}
	if err := x.RUnlockContext(xo); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("lost reader X's RUnlock = %v; want ErrNotHeld", err)
	}
	for _, r := range []struct {
		m *rwlock.RWMutex
		o context.Context
	}{{l, lo}, {m, mo}} {
		if err := r.m.RUnlockContext(r.o); err != nil {
			t.Errorf("a live reader's RUnlock: %v", err)
		}
	}
	y.RUnlockContext(yo)
}
