package multilock_test

import (
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/tests/fake"
)

func TestMain(m *testing.M) { testserver.Main(m, fake.StopShared) }
