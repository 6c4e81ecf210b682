package dsync_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWithOwner(t *testing.T) {
	ctx := context.Background()
	if id, ok := dsync.OwnerFrom(ctx); ok {
		t.Fatalf("background context has owner %q", id)
	}
	a := dsync.WithOwner(ctx)
	id, ok := dsync.OwnerFrom(a)
	if !ok || len(id) != 32 {
		t.Fatalf("OwnerFrom(WithOwner(ctx)) = %q, %v; want a 32-digit id", id, ok)
	}
	derived, cancel := context.WithCancel(a)
	defer cancel()
	if got, _ := dsync.OwnerFrom(derived); got != id {
		t.Errorf("derived context has owner %q, want %q", got, id)
	}
	b := dsync.WithOwner(a)
	if got, _ := dsync.OwnerFrom(b); got == id {
		t.Errorf("WithOwner on an owned context kept the owner %q", got)
	}
}

func TestNewIDUnique(t *testing.T) {
	seen := make(map[string]bool)
	for i := 0; i < 10000; i++ {
		id := dsync.NewID()
		if seen[id] {
			t.Fatalf("duplicate id %q after %d", id, i)
		}
		seen[id] = true
	}
}
