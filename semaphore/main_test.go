package semaphore_test

import (
	"testing"

	"github.com/dsyncgo/dsync/internal/testserver"
)

func TestMain(m *testing.M) {
	if maybeChild() {
		return
	}
	testserver.Main(m)
}
