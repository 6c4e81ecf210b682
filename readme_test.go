package dsync_test

import (
	"os"
	"strings"
	"testing"
)

// The README's quick start is examples/quickstart, which CI builds in a
// fresh module (.ci/usermod): the two must not drift apart.
func TestReadmeMirrorsQuickstart(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Error("README.md does not quote examples/quickstart/main.go verbatim in a go block")
	}
}
