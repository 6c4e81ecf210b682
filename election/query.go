package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// Leader is the leader of an election as others see it. The zero Leader
// means that no term is on.
type Leader struct {
	// Value is the leader's value: the one it campaigned with, or that
	// of its last Proclaim. It is empty if unknown (the election's keys
	// were deleted behind its back).
	Value string
	// Token is the term's fencing token (see Term.Token).
	Token int64
	// Began is when the term began, by the server's clock, in
	// milliseconds; zero if unknown.
	Began time.Time
}

// IsZero reports whether l is the zero Leader: no term is on.
func (l Leader) IsZero() bool { return l == Leader{} }

// observed is a state of the election as a read or a message tells it.
type observed struct {
	ver    int64 // the order of states: twice the rev, plus 1 if lapsed
	leader Leader
	ttl    time.Duration // the term's remaining lease; negative if none or no expiry
}

// parseObserved decodes the head of a read's reply or a message's fields:
// rev, lapsed, token, began ms, ttl ms, value (see lua/term.lua).
func parseObserved(f []any) (observed, error) {
	var n [5]int64
	for i := range n {
		v, err := backend.Int(f[i])
		if err != nil {
			return observed{}, err
		}
		n[i] = v
	}
	value, err := backend.String(f[5])
	if err != nil {
		return observed{}, err
	}
	o := observed{ver: 2*n[0] + n[1], ttl: -1}
	if n[1] == 1 {
		return o, nil
	}
	if n[2] < 1 {
		return observed{}, fmt.Errorf("%w: leader with token %d", dsync.ErrUnexpectedReply, n[2])
	}
	o.leader = Leader{Value: value, Token: n[2]}
	if n[3] > 0 {
		o.leader.Began = time.UnixMilli(n[3])
	}
	if n[4] >= 0 {
		o.ttl = time.Duration(n[4]) * time.Millisecond
	}
	return o, nil
}

// Leader returns the current leader, or an error matching
// dsync.ErrNoLeader if no term is on. It reads the server in one round
// trip.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.h.Begin("leader", ctx); err != nil {
		return Leader{}, err
	}
	o, _, err := e.read(ctx, 0)
	if err != nil {
		return Leader{}, e.h.Wrap("leader", err)
	}
	if o.leader.IsZero() {
		return Leader{}, e.h.Wrap("leader", dsync.ErrNoLeader)
	}
	return o.leader, nil
}

// State is a snapshot of an election on the server.
type State struct {
	Leader    Leader        // the zero Leader if no term is on
	Owner     string        // the leader's owner id, fresh for every campaign; "" if none
	TTL       time.Duration // the term's remaining lease; -1 if it has no expiry, 0 if none
	LastToken int64         // the term's token, or if none is on the last one (0 if none is known)

	// Queued counts the live candidates waiting; Candidates holds the
	// values of the first of them (up to MaxListed), in the order they
	// will lead.
	Queued     int
	Candidates []string
}

// MaxListed bounds the candidates State lists.
const MaxListed = 10

// State reads the election's state in one round trip.
func (e *Election) State(ctx context.Context) (State, error) {
	if err := e.h.Begin("state", ctx); err != nil {
		return State{}, err
	}
	o, r, err := e.read(ctx, MaxListed)
	if err != nil {
		return State{}, e.h.Wrap("state", err)
	}
	s := State{Leader: o.leader}
	var errs [3]error
	s.LastToken, errs[0] = backend.Int(r[2])
	s.Owner, errs[1] = backend.String(r[6])
	var queued int64
	queued, errs[2] = backend.Int(r[8])
	if err := errors.Join(errs[:]...); err != nil {
		return State{}, e.h.Wrap("state", err)
	}
	s.Queued = int(queued)
	if !o.leader.IsZero() {
		s.TTL = o.ttl
	}
	for _, v := range r[9:] {
		c, err := backend.String(v)
		if err != nil {
			return State{}, e.h.Wrap("state", err)
		}
		s.Candidates = append(s.Candidates, c)
	}
	return s, nil
}

// read runs the inspect script, listing up to list candidates, and
// returns the state observers are told and the whole reply.
func (e *Election) read(ctx context.Context, list int) (observed, []any, error) {
	reply, err := e.h.B.Eval(ctx, inspectScript, e.keys, list)
	if err != nil {
		return observed{}, nil, err
	}
	r, err := backend.Array(reply, 9)
	if err != nil {
		return observed{}, nil, err
	}
	o, err := parseObserved(r)
	return o, r, err
}

// ForceResign ends the current term whoever leads, and hands leadership
// to the next candidate as Resign does. It reports whether a term was on.
// A leader in this process learns of the loss at once through Done; one
// in another process at its next renewal, or, on a fixed lease, when its
// lease ends.
func (e *Election) ForceResign(ctx context.Context) (bool, error) {
	return e.h.ForceUnlock(ctx, 0, &e.force)
}

// ForceResignToken is ForceResign for one term only: it ends the current
// term only if its fencing token is token, as read by Leader or State, so
// that a term begun since is left alone. It reports whether it ended it.
func (e *Election) ForceResignToken(ctx context.Context, token int64) (bool, error) {
	return e.h.ForceUnlockToken(ctx, token, &e.force)
}
