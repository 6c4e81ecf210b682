package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/testserver"
)

// The soak catches a broken build. Deliberately broken clients run side by
// side under the nemesis, as TestNemesisSoak runs the real ones, for a few
// seconds, and their groups' checkers must report violations:
//
//   - semaphore-nocap: a semaphore that lets in more than its capacity (the
//     clients raise it on the server to 9, the checker holds it to 3);
//   - permits-nocap: portable permits that do the same (the clients raise
//     the capacity on the server to 9, then run the permits group's loop:
//     AcquirePermit, ExtendPermit, release by id by another client; the
//     checker holds it to 3);
//   - mutex-nolock: a mutex that excludes nobody (each client locks a name
//     of its own);
//   - rwlock-readers-elsewhere: read holds that do not keep writers out
//     (readers lock another name than writers);
//   - election-split: an election that lets several lead at once (each
//     client campaigns in an election of its own).
//
// Each must be caught twice: by the overlaps of lease-valid holds (or
// permits above the capacity), and by porcupine; but permits-nocap, whose
// group has no porcupine model, is caught by the permits above the
// capacity alone. The evidence is in the log.
func TestSoakCatchesBrokenBuilds(t *testing.T) {
	testserver.Long(t, "five soaks of broken builds, 10 s")
	// noModel are the broken groups whose checker runs no porcupine
	// model: checkPermitsGroup only counts the lease-valid permits,
	// portable and owners', at each instant, so the permits above the
	// capacity are the one check there is to catch the breakage. Asking
	// for porcupine there would fail every run, whatever the build.
	noModel := map[string]bool{"permits-nocap": true}
	var groups []soakGroup
	for _, g := range soakGroups() {
		if g.broken {
			groups = append(groups, g)
		}
	}
	reports := runSoak(t, groups, 8*time.Second, *soakSeed, false)
	for _, g := range groups {
		r := reports[g.name]
		// Both checks must see it: lease-valid holds at once that may not
		// be (or permits above the capacity), and a history that no order
		// of the operations explains; the first alone where there is no
		// model.
		switch {
		case r.overlaps == 0 && noModel[g.name]:
			t.Errorf("%s: a broken build not caught by the permits above the capacity: %v", g.name, r)
			continue
		case r.overlaps == 0 || !noModel[g.name] && !notLinearizable(r):
			t.Errorf("%s: a broken build not caught by both the overlaps and porcupine: %v", g.name, r)
			continue
		}
		t.Logf("%s: caught: %s", g.name, r.problems[0])
		for _, p := range r.problems {
			if strings.Contains(p, "linearizable") {
				t.Logf("%s: caught: %s", g.name, p)
			}
		}
		t.Logf("%s: %d violations in all", g.name, len(r.problems))
	}
}
