package backend

import (
	"crypto/sha1"
	"encoding/hex"
)

// Script is a Lua script with its SHA1 digest, computed once.
type Script struct {
	src     string
	hash    string
	hashArg any // hash as a command argument, boxed once
}

// NewScript returns a Script for the Lua source src.
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	h := hex.EncodeToString(sum[:])
	return &Script{src: src, hash: h, hashArg: h}
}

// Source returns the Lua source, for EVAL.
func (s *Script) Source() string { return s.src }

// Hash returns the lowercase hex SHA1 of the source, for EVALSHA.
func (s *Script) Hash() string { return s.hash }

// HashArg returns Hash as an interface value made once, for an adapter
// whose client takes a command's arguments as []any: converting the
// string on every call would allocate.
func (s *Script) HashArg() any { return s.hashArg }
