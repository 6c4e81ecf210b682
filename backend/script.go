package backend

import (
	"crypto/sha1"
	"encoding/hex"
)

// Script is a Lua script with its SHA1 digest, computed once.
type Script struct {
	src  string
	hash string
}

// NewScript returns a Script for the Lua source src.
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, hash: hex.EncodeToString(sum[:])}
}

// Source returns the Lua source, for EVAL.
func (s *Script) Source() string { return s.src }

// Hash returns the lowercase hex SHA1 of the source, for EVALSHA.
func (s *Script) Hash() string { return s.hash }
