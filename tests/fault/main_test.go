package fault

import (
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/tests/fake"
)

func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	testserver.Main(m, fake.StopShared)
}
