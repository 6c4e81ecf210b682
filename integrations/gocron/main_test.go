package dsyncgocron_test

import (
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
)

func TestMain(m *testing.M) {
	if schedulerChild() {
		return
	}
	testserver.Main(m)
}
