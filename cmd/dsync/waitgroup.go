package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/waitgroup"
)

// kindWaitGroup is a wait group: inspect and list know it; force-unlock
// does not apply.
const kindWaitGroup = "waitgroup"

// Units is the state of a wait group: its count and who owes it.
type Units struct {
	Count     int64       `json:"count"`     // units pending, abandoned ones aside
	Owners    []UnitOwner `json:"owners"`    // the owners of those units, the earliest lease end first
	Abandoned *UnitOwner  `json:"abandoned"` // the first abandonment while units are pending; null if none
}

// UnitOwner is an owner's units in a wait group.
type UnitOwner struct {
	Owner   string `json:"owner"`
	Units   int64  `json:"units"`
	LeaseMS int64  `json:"lease_ms,omitempty"` // left; 0 or less: ended, in a group that keeps abandoned units
}

// readWaitGroup fills s with the state of the wait group called name.
func readWaitGroup(ctx context.Context, b backend.Backend, prefix, name string, s *lockState) error {
	st, err := waitgroup.New(b, name, waitgroup.WithPrefix(prefix)).State(ctx)
	if err != nil {
		return err
	}
	s.Locked, s.Waiters = st.Count > 0, st.Waiters
	s.Units = &Units{Count: st.Count, Owners: []UnitOwner{}}
	for _, o := range st.Owners {
		s.Owners = append(s.Owners, UnitOwner{o.Owner, o.Units, o.Lease.Milliseconds()})
	}
	if a := st.Abandoned; a != nil {
		s.Abandoned = &UnitOwner{Owner: a.Owner, Units: a.Units}
	}
	return nil
}

func (s lockState) writeWaitGroup(w io.Writer) {
	if !s.Locked {
		fmt.Fprintf(w, "%s %q: empty (key %s)\n", s.Kind, s.Name, s.Key)
	} else {
		fmt.Fprintf(w, "%s %q: %s pending (key %s)\n", s.Kind, s.Name, plural(int(s.Count), "unit"), s.Key)
	}
	if len(s.Owners) > 0 {
		fmt.Fprintf(w, "  owners:     %s\n", describeOwners(s.Units))
	}
	if s.Abandoned != nil {
		fmt.Fprintf(w, "  abandoned:  %s of %s (its lease ran out)\n", plural(int(s.Abandoned.Units), "unit"), printable(s.Abandoned.Owner))
	}
	if s.Locked || s.Waiters > 0 {
		fmt.Fprintf(w, "  waiters:    %d\n", s.Waiters)
	}
}

// describeOwners says who owes a wait group's units.
func describeOwners(u *Units) string {
	var parts []string
	for _, o := range u.Owners {
		lease := "lease ended"
		if o.LeaseMS > 0 {
			lease = fmt.Sprintf("%dms left", o.LeaseMS)
		}
		parts = append(parts, fmt.Sprintf("%s %d (%s)", printable(o.Owner), o.Units, lease))
	}
	return strings.Join(parts, ", ")
}

// writeWaitGroupTable prints held wait groups as a table.
func writeWaitGroupTable(tw io.Writer, held []lockState) {
	fmt.Fprintf(tw, "NAME\tCOUNT\tOWNERS\tABANDONED\tWAITERS\n")
	for _, s := range held {
		abandoned := "-"
		if s.Abandoned != nil {
			abandoned = fmt.Sprintf("%d of %s", s.Abandoned.Units, printable(s.Abandoned.Owner))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\n", printable(s.Name), s.Count, len(s.Owners), abandoned, s.Waiters)
	}
}
