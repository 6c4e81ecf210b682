package waitgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// State is a snapshot of a wait group on the server.
type State struct {
	Count     int64           // units pending, abandoned ones aside
	Owners    []Owner         // the owners of those units, the earliest lease end first
	Abandoned *AbandonedError // the first abandonment of the units pending, or nil
	Waiters   int             // waiters registered and alive
}

// Owner is an owner's share of a group's count.
type Owner struct {
	Owner string
	Units int64
	Lease time.Duration // left on the server; 0 or less: ended, in a group that keeps abandoned units
}

// State reads the group's state in one round trip. Units whose lease ended
// count as abandoned, whether or not a script has found them yet.
func (g *WaitGroup) State(ctx context.Context) (State, error) {
	if err := g.h.Begin("state", ctx); err != nil {
		return State{}, err
	}
	reply, err := g.h.B.Eval(ctx, inspectScript, g.keys)
	if err != nil {
		return State{}, g.h.Wrap("state", err)
	}
	st, err := decodeState(reply)
	return st, g.h.Wrap("state", err)
}

func decodeState(reply any) (State, error) {
	r, err := backend.Array(reply, 4)
	if err == nil && (len(r)-4)%3 != 0 {
		err = fmt.Errorf("%w: state reply %v", dsync.ErrUnexpectedReply, reply)
	}
	if err != nil {
		return State{}, err
	}
	var st State
	n, err1 := backend.Int(r[0])
	ab, err2 := backend.String(r[2])
	w, err3 := backend.Int(r[3])
	st.Count, st.Waiters = n, int(w)
	if ab != "" {
		st.Abandoned = &AbandonedError{}
		fmt.Sscan(ab, &st.Abandoned.Owner, &st.Abandoned.Units)
	}
	for i := 4; i < len(r); i += 3 {
		o, err4 := backend.String(r[i])
		u, err5 := backend.Int(r[i+1])
		left, err6 := backend.Int(r[i+2])
		if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
			return State{}, err
		}
		st.Owners = append(st.Owners, Owner{o, u, time.Duration(left) * time.Millisecond})
	}
	return st, errors.Join(err1, err2, err3)
}

// Count returns the units pending on the server now, abandoned ones aside
// (see State).
func (g *WaitGroup) Count(ctx context.Context) (int64, error) {
	st, err := g.State(ctx)
	return st.Count, err
}
