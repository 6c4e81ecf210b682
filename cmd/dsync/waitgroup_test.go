package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/waitgroup"
)

var waitgroupFields = []string{"abandoned", "count", "key", "kind", "locked", "name", "owners", "waiters"}

// inspect and list show a wait group's count, its owners and the first
// abandonment; force-unlock refuses it.
func TestInspectAndListWaitGroup(t *testing.T) {
	m := startMini(t)
	ctx := context.Background()
	a := waitgroup.New(newBackend(t, m.Addr()), "deploy")
	if err := a.Add(ctx, 2); err != nil {
		t.Fatal(err)
	}
	defer a.Done(ctx)
	defer a.Done(ctx)
	dead := waitgroup.New(newBackend(t, m.Addr()), "deploy", waitgroup.WithLease(100*time.Millisecond))
	if err := dead.Add(ctx, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // dead's lease runs out: time is what is tested

	code, stdout, stderr := runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "waitgroup", "-json", "deploy")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := jsonFields(t, stdout); !slices.Equal(got, waitgroupFields) {
		t.Errorf("fields %q, want %q", got, waitgroupFields)
	}
	s := decodeLock(t, stdout)
	if s.Kind != "waitgroup" || s.Key != "dsync:waitgroup:{deploy}" || !s.Locked || s.Count != 2 || len(s.Owners) != 1 ||
		s.Owners[0].Owner != a.Owner() || s.Owners[0].Units != 2 || s.Abandoned == nil || s.Abandoned.Owner != dead.Owner() || s.Abandoned.Units != 1 {
		t.Errorf("inspect -kind waitgroup -json: %+v, abandoned %+v", s.Units, s.Abandoned)
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "waitgroup", "deploy")
	for _, want := range []string{`waitgroup "deploy": 2 units pending`, "owners:     " + a.Owner() + " 2", "abandoned:  1 unit of " + dead.Owner()} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("inspect lacks %q: exit %d\n%s", want, code, stdout)
		}
	}
	code, stdout, _ = runCmd(t, "", "inspect", "-redis", m.Addr(), "-kind", "waitgroup", "other")
	if code != exitOK || !strings.Contains(stdout, `waitgroup "other": empty`) {
		t.Errorf("inspect of an empty group: exit %d\n%s", code, stdout)
	}

	code, stdout, stderr = runCmd(t, "", "list", "-redis", m.Addr(), "-kind", "waitgroup")
	if code != exitOK || !strings.Contains(stdout, "NAME") || !strings.Contains(stdout, "deploy") || !strings.Contains(stdout, "1 of "+dead.Owner()) {
		t.Errorf("list -kind waitgroup: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCmd(t, "", "force-unlock", "-redis", m.Addr(), "-kind", "waitgroup", "-yes", "deploy"); code == exitOK || !strings.Contains(stderr, "wait group") {
		t.Errorf("force-unlock of a wait group: exit %d, %s", code, stderr)
	}
}
