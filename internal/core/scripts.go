package core

import (
	_ "embed"

	"github.com/dsyncgo/dsync/internal/script"
)

//go:embed token.lua
var tokenLua string

//go:embed release_plain.lua
var releasePlainLua string

// releasePlain is the release of a plain hold alone (see
// ReleaseSpec.Plain).
var releasePlain = script.New(releasePlainLua)

// TokenScript draws the fencing token of an exclusive hold that has none
// yet (see HoldSpec.Token).
var TokenScript = script.New(tokenLua)
