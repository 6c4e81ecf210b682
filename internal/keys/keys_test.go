package keys

import (
	"errors"
	"go.uber.org/goleak"
	"strings"
	"testing"

	"github.com/dsyncgo/dsync"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBase(t *testing.T) {
	got, err := Base("dsync", "mutex", "orders:42")
	if err != nil || got != "dsync:mutex:{orders:42}" {
		t.Fatalf("Base = %q, %v", got, err)
	}
}

func TestBaseEscapesBraces(t *testing.T) {
	for _, name := range []string{"}", "{", "a}b", "}x{", "{}", "%7D", "a{b}c"} {
		base, err := Base("p", "mutex", name)
		if err != nil {
			t.Fatal(err)
		}
		// Every key derived from base hashes to the same slot, and
		// different names give different keys.
		if Slot(base) != Slot(base+":waiters") || Slot(base) != Slot(base+":fence") {
			t.Errorf("name %q: companions of %q land in different slots", name, base)
		}
		if HashTag(base) == base {
			t.Errorf("name %q: key %q has no hash tag", name, base)
		}
	}
	a, _ := Base("p", "mutex", "}")
	b, _ := Base("p", "mutex", "%7D")
	if a == b {
		t.Errorf("names } and %%7D share key %q", a)
	}
}

func TestBaseRejects(t *testing.T) {
	cases := []struct{ prefix, name string }{
		{"dsync", ""},
		{"dsync", strings.Repeat("x", 2048)},
		{"", "n"},
		{"a{b", "n"},
		{strings.Repeat("p", 300), "n"},
	}
	for _, c := range cases {
		if _, err := Base(c.prefix, "mutex", c.name); !errors.Is(err, dsync.ErrInvalidName) {
			t.Errorf("Base(%.10q, %.10q): %v, want ErrInvalidName", c.prefix, c.name, err)
		}
	}
	if _, err := Base("dsync", "mutex", strings.Repeat("x", MaxNameLen)); err != nil {
		t.Errorf("name of MaxNameLen bytes: %v", err)
	}
}

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	cases := map[string]uint16{
		"123456789":            0x31C3 % 16384,
		"foo":                  12182,
		"{user1000}.following": Slot("user1000"),
		"foo{}{bar}":           Slot("foo{}{bar}"),
	}
	for key, want := range cases {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if HashTag("foo{}{bar}") != "foo{}{bar}" {
		t.Errorf("empty tag not treated as no tag")
	}
	if HashTag("foo{{bar}}zap") != "{bar" {
		t.Errorf("HashTag(foo{{bar}}zap) = %q", HashTag("foo{{bar}}zap"))
	}
}
