// Package script_test checks the Lua scripts that package internal/script
// builds for every primitive, on a real redis-server.
package script_test

import (
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }
