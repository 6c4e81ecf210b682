package core

import (
	_ "embed"

	"github.com/dsyncgo/dsync/internal/script"
)

//go:embed token.lua
var tokenLua string

// TokenScript draws the fencing token of an exclusive hold that has none
// yet (see HoldSpec.Token).
var TokenScript = script.New(tokenLua)
