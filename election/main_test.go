package election_test

import (
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
)

func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	testserver.Main(m)
}
