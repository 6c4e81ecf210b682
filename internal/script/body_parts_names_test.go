package script

import "testing"

// A body in parts cannot have a name read as another definition than the
// one it names: building the script panics, at init. A top-level local of
// a part that a Library line follows, named as a definition of the
// library, is what the definitions made after it read, or is hidden from
// the parts after it by the library's, made after it; a library that
// defines a name twice would give a later part the definition made for an
// earlier one. Neither is a global read, which tests/script finds.
func TestScriptBodyInPartsNamesPanic(t *testing.T) {
	for _, c := range []struct {
		name  string
		parts []string
	}{
		{"a part's local named as a definition", []string{Library + "local s = load(KEYS[1])\nlocal load = s.owner\n" + Library + "return load\n"}},
		{"a fast path's local named as a definition", []string{"local header = ARGV[1]\n" + Library + "return header\n"}},
		{"a name defined twice", []string{"local function x()\n  return 1\nend\nlocal function x()\n  return 2\nend\n",
			Library + "local y = x()\n" + Library + "return y + x()\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			New(c.parts...)
		})
	}
}
