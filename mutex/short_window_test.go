package mutex

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dsyncgo/dsync/internal/script"
)

// The handle's look at the queue (core.ReleaseSpec.LookAfter) comes when
// the scripts' window after a head's wake-up has passed: both count the
// same thresholds.
func TestShortWindowIsTheScripts(t *testing.T) {
	want := fmt.Sprintf("\nlocal short_window = %d\n", shortWindow)
	if !strings.Contains(script.Exclusive, want) {
		t.Fatalf("exclusive.lua does not define %q: the release's look (shortWindow) and the scripts' window disagree", strings.TrimSpace(want))
	}
}
