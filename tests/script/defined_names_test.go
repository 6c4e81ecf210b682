package script_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	_ "github.com/dsyncgo/dsync/election"
	_ "github.com/dsyncgo/dsync/fairlock"
	_ "github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/script"
	"github.com/dsyncgo/dsync/internal/testserver"
	_ "github.com/dsyncgo/dsync/multilock"
	_ "github.com/dsyncgo/dsync/mutex"
	_ "github.com/dsyncgo/dsync/rwlock"
	_ "github.com/dsyncgo/dsync/semaphore"
	_ "github.com/dsyncgo/dsync/waitgroup"
)

// compile replies with the bytecode of the Lua source ARGV[1], compiled
// by the server's own Lua (5.1), without running it.
var compile = backend.NewScript(`local f, err = loadstring(ARGV[1], 'checked')
if not f then return redis.error_reply('DSYNCTEST compile: ' .. err) end
return string.dump(f)`)

// serverGlobals are the names a script may read without defining them:
// those of redis's Lua environment.
var serverGlobals = strings.Fields(`KEYS ARGV redis bit cjson cmsgpack struct
	math string table os
	assert error getmetatable ipairs next pairs pcall rawequal rawget rawset
	select setmetatable tonumber tostring type unpack xpcall loadstring`)

// Every script that package script builds reads only names it defines or
// that the server does: a script's library is cut down to the definitions
// its body names (see script.New), and a definition dropped that a path of
// the script calls would become a read of an undefined global, an error
// only when that path runs (error handling, WRONGTYPE, force, abandon,
// renewals). The server's compiler resolves each name: the bytecode's
// global reads are the names no local defines.
func TestEveryScriptReadsOnlyNamesItOrTheServerDefines(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := srv.NewBackend(t)
	// The checker itself: a global read only on a path that never runs,
	// in a nested function, is found.
	if g := globals(t, ctx, b, "local function a(x)\n  if x then return b(x) end\nend\nreturn a(1)"); !slices.Equal(g, []string{"b"}) {
		t.Fatalf("the checker found %v in a script reading b; want [b]", g)
	}
	scripts := script.Built()
	if len(scripts) < 40 {
		t.Fatalf("%d scripts built; want those of every primitive", len(scripts))
	}
	for _, s := range scripts {
		for _, g := range globals(t, ctx, b, s.Source()) {
			if !slices.Contains(serverGlobals, g) {
				first, _, _ := strings.Cut(strings.TrimLeft(s.Source(), "\n"), "\n")
				t.Errorf("script %s (%q): reads %s, which neither it nor the server defines", s.Hash()[:8], first, g)
			}
		}
	}
}

// globals returns the names that src reads or writes as globals, sorted.
func globals(t *testing.T, ctx context.Context, b backend.Backend, src string) []string {
	t.Helper()
	reply, err := b.Eval(ctx, compile, nil, src)
	if err != nil {
		if strings.Contains(err.Error(), "nonexistent global") {
			// A server whose scripts have no loadstring or string.dump.
			t.Skipf("the server does not let a script compile another: %v", err)
		}
		t.Fatal(err)
	}
	var code []byte
	switch v := reply.(type) {
	case string:
		code = []byte(v)
	case []byte:
		code = v
	default:
		t.Fatalf("bytecode replied as %T", reply)
	}
	names, err := readGlobals(code)
	if err != nil {
		t.Skipf("bytecode not of Lua 5.1 on 64 bits: %v", err)
	}
	return names
}

// readGlobals reads a Lua 5.1 bytecode dump (lundump.c) and returns the
// names of its GETGLOBAL and SETGLOBAL instructions, in every function.
func readGlobals(code []byte) (names []string, err error) {
	defer func() {
		if recover() != nil {
			err = errors.New("truncated")
		}
	}()
	r := &dump{b: code}
	// Signature, version 5.1, official format, little-endian, int 4,
	// size_t 8, instruction 4, number 8 bytes, floating point.
	if h := string(r.take(12)); h != "\x1bLua\x51\x00\x01\x04\x08\x04\x08\x00" {
		return nil, fmt.Errorf("header %x", h)
	}
	seen := map[string]bool{}
	if err := r.function(seen); err != nil {
		return nil, err
	}
	if r.pos != len(code) {
		return nil, fmt.Errorf("%d bytes after the main function", len(code)-r.pos)
	}
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

type dump struct {
	b   []byte
	pos int
}

func (r *dump) take(n int) []byte {
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *dump) int() int { return int(int32(binary.LittleEndian.Uint32(r.take(4)))) }

func (r *dump) string() string {
	n := int(binary.LittleEndian.Uint64(r.take(8)))
	if n == 0 {
		return ""
	}
	return string(r.take(n)[:n-1]) // with its terminating NUL
}

func (r *dump) function(seen map[string]bool) error {
	const getGlobal, setGlobal = 5, 7
	r.string() // source
	r.take(8)  // line defined, last line defined
	r.take(4)  // upvalues, parameters, vararg, stack size
	code := make([]uint32, r.int())
	for i := range code {
		code[i] = binary.LittleEndian.Uint32(r.take(4))
	}
	consts := make([]string, r.int())
	for i := range consts {
		switch kind := r.take(1)[0]; kind {
		case 0: // nil
		case 1: // boolean
			r.take(1)
		case 3: // number
			r.take(8)
		case 4:
			consts[i] = r.string()
		default:
			return fmt.Errorf("constant of type %d", kind)
		}
	}
	for _, ins := range code {
		if op := ins & 0x3f; op == getGlobal || op == setGlobal {
			seen[consts[ins>>14]] = true // Bx: the name's constant
		}
	}
	for range r.int() {
		if err := r.function(seen); err != nil {
			return err
		}
	}
	r.take(4 * r.int()) // line of each instruction
	for range r.int() { // locals: name, first and last pc
		r.string()
		r.take(8)
	}
	for range r.int() { // upvalue names
		r.string()
	}
	return nil
}
