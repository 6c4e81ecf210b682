package owner

import (
	"context"
	"testing"
	"time"
)

// A detached context keeps ctx's owner and values, drops its deadline and
// cancellation, and its owner is found without an allocation, which a
// lookup through context.WithoutCancel costs.
func TestDetachKeepsOwnerWithoutAllocating(t *testing.T) {
	type other struct{}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), other{}, "v"), time.Hour)
	ctx = With(ctx, "o1")
	d := Detach(ctx)
	cancel()
	if d.Err() != nil || d.Done() != nil {
		t.Errorf("detached: Err %v, Done %v; want neither", d.Err(), d.Done())
	}
	if _, ok := d.Deadline(); ok {
		t.Error("detached: has a deadline")
	}
	if id, ok := From(d); id != "o1" || !ok {
		t.Errorf("From(detached) = %q, %v; want o1", id, ok)
	}
	if v := d.Value(other{}); v != "v" {
		t.Errorf("detached: value %v; want v", v)
	}
	if n := testing.AllocsPerRun(100, func() { From(d) }); n != 0 {
		t.Errorf("From(detached): %.1f allocations; want 0", n)
	}
	if _, ok := From(Detach(context.Background())); ok {
		t.Error("a context without an owner detached has one")
	}
}
