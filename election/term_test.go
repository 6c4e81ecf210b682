package election_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/election"
)

// A Term not made by Campaign is over: no panic, no I/O.
func TestZeroTermIsOver(t *testing.T) {
	var term election.Term
	ctx := context.Background()
	select {
	case <-term.Done():
	default:
		t.Error("Done of the zero Term is open")
	}
	if tok, err := term.Token(ctx); tok != 0 || !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("zero Term: Token = %d, %v; want 0 and ErrNotHeld", tok, err)
	}
	if term.Value() != "" {
		t.Errorf("zero Term: value %q", term.Value())
	}
	if err := term.Proclaim(ctx, "x"); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Proclaim: %v; want ErrNotHeld", err)
	}
	if err := term.Resign(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Resign: %v; want ErrNotHeld", err)
	}
}
