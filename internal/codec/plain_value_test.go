package codec

import (
	"encoding/hex"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPlainValue(t *testing.T) {
	for _, c := range []struct {
		role   string
		fields []int64
		want   string
	}{
		{"x", nil, "o i"},
		{"r", nil, "o i r"},
		{"x", []int64{2, -9223372036854775808, 9223372036854775807}, "o i 2 -9223372036854775808 9223372036854775807"},
		{"r", []int64{0}, "o i r 0"},
	} {
		if got := PlainValue("o", "i", c.role, c.fields...); got != c.want {
			t.Errorf("PlainValue(o, i, %q, %v) = %q, want %q", c.role, c.fields, got, c.want)
		}
	}
}

// isID reports whether s is an id as dsync.NewID makes them.
func isID(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 16
}

func TestNewHoldIDs(t *testing.T) {
	seen := make(map[string]bool)
	for i := range 1000 {
		owner, op, plain := NewHold("", "x", "")
		if !isID(owner) || !isID(op) || owner == op {
			t.Fatalf("NewHold: owner %q, op %q: want two distinct ids of 32 hex digits", owner, op)
		}
		if want := PlainValue(owner, op, "x"); plain != want {
			t.Fatalf("NewHold plain value %q, want %q", plain, want)
		}
		if seen[owner] || seen[op] {
			t.Fatalf("an id came twice after %d holds", i)
		}
		seen[owner], seen[op] = true, true
	}
	for _, c := range []struct {
		owner, role string
		fields      []int64
	}{{"caller", "x", nil}, {"caller", "r", nil}, {"", "r", nil}, {"caller", "x", []int64{3, 10}}, {"", "x", []int64{1}}} {
		owner, op, plain := NewHold(c.owner, c.role, "", c.fields...)
		if c.owner != "" && owner != c.owner || !isID(owner) && c.owner == "" || !isID(op) {
			t.Errorf("NewHold(%q, %q, %v): owner %q, op %q", c.owner, c.role, c.fields, owner, op)
		}
		if want := PlainValue(owner, op, c.role, c.fields...); plain != want {
			t.Errorf("NewHold(%q, %q, %v): plain value %q, want %q", c.owner, c.role, c.fields, plain, want)
		}
	}
}

func TestTermValue(t *testing.T) {
	if got, want := TermValue("o", "i", 30000, 3600000, "a b=c"), "o i 30000 3600000 =a b=c"; got != want {
		t.Errorf("TermValue = %q, want %q", got, want)
	}
	if got, want := TermValue("o", "i", 5, 1000, ""), "o i 5 1000 ="; got != want {
		t.Errorf("TermValue with an empty value = %q, want %q", got, want)
	}
	owner, op, plain := NewHold("", "x", TermTail("v 1"), 30000, 3600000)
	if want := TermValue(owner, op, 30000, 3600000, "v 1"); plain != want {
		t.Errorf("NewHold of a term: plain value %q, want %q", plain, want)
	}
	if n := testing.AllocsPerRun(100, func() { NewHold("", "x", "=value", 30000, 3600000) }); n != 1 {
		t.Errorf("NewHold of a term allocates %v times, want 1", n)
	}
}

func TestNewHoldAllocatesOnce(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { NewHold("", "x", "") }); n != 1 {
		t.Errorf("NewHold of an ownerless hold allocates %v times, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { NewHold("caller", "x", "", 2, 5) }); n != 1 {
		t.Errorf("NewHold for an owner allocates %v times, want 1", n)
	}
}
