package waitgroup_test

import (
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }
