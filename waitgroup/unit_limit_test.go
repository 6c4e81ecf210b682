package waitgroup_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/waitgroup"
)

// TestAddBeyondMaxUnits: the count is exact up to waitgroup.MaxUnits and
// never passes it. An Add of more is ErrInvalidPermits before any I/O;
// one that would take the count past it, from any handle, is
// ErrInvalidPermits and adds nothing; the count and the owners' units
// stay as they were, and Done still counts down.
func TestAddBeyondMaxUnits(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := prefix()
	g := open(srv.NewBackend(t), p)
	for _, n := range []int64{math.MaxInt64, waitgroup.MaxUnits + 1} {
		if err := g.Add(ctx, n); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("Add(%d): %v, want ErrInvalidPermits", n, err)
		}
	}
	if ks := keysUnder(t, srv, p); len(ks) != 0 {
		t.Fatalf("keys after refused Adds: %v", ks)
	}
	defer srv.Do(context.Background(), "DEL", p+":waitgroup:{g}", p+":waitgroup:{g}:holders")
	if err := g.Add(ctx, waitgroup.MaxUnits-1); err != nil {
		t.Fatal(err)
	}
	other := open(srv.NewBackend(t), p)
	if err := other.Add(ctx, 2); !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("Add past MaxUnits through another handle: %v, want ErrInvalidPermits", err)
	}
	if err := g.Add(ctx, 2); !errors.Is(err, dsync.ErrInvalidPermits) {
		t.Errorf("Add past MaxUnits: %v, want ErrInvalidPermits", err)
	}
	if err := other.Add(ctx, 1); err != nil {
		t.Fatalf("Add up to MaxUnits: %v", err)
	}
	st, err := g.State(ctx)
	if err != nil || st.Count != waitgroup.MaxUnits || len(st.Owners) != 2 {
		t.Fatalf("state %+v, %v; want a count of MaxUnits from 2 owners", st, err)
	}
	if err := other.Done(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Done(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("a Done past the refused Add: %v, want ErrNotHeld", err)
	}
	if err := g.Done(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := g.State(ctx); err != nil || st.Count != waitgroup.MaxUnits-2 || len(st.Owners) != 1 || st.Owners[0].Units != waitgroup.MaxUnits-2 {
		t.Errorf("state %+v, %v; want MaxUnits-2 units of one owner", st, err)
	}
}
