package mutex

import (
	"context"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
)

// Token returns the fencing token of the hold of ctx's owner taken
// through m's backend value (or of the newest ownerless hold taken through
// m). Tokens strictly increase from one hold of the mutex to the next,
// whoever takes it; re-entering returns the same token. The first Token
// of a hold taken with one plain SET draws its token on the server, one
// round trip bounded by ctx; otherwise it does no I/O (see "Fencing
// tokens" in the package documentation). It returns an error matching
// dsync.ErrNotHeld if there is no such hold or it was lost.
func (m *Mutex) Token(ctx context.Context) (int64, error) {
	return m.h.Token(ctx, &m.hold)
}

// Done returns a channel that is closed when the hold of ctx's owner taken
// through m's backend value (or the newest ownerless hold taken through m)
// ends: lost, because a renewal
// found it gone or renewals failed until its lease ran out, or released by
// its final unlock. If there is no such hold, the channel is already
// closed. It does no I/O.
func (m *Mutex) Done(ctx context.Context) <-chan struct{} {
	return m.h.Done(ctx, core.Exclusive)
}

// State is a snapshot of a mutex on the server.
type State struct {
	Locked    bool
	HoldCount int           // holds of the asking owner; 0 for any other
	TTL       time.Duration // remaining lease; -1 if the key has no expiry

	Holder      string   // the holder's owner id; "" if free
	HolderCount int      // the holder's hold count
	Token       int64    // the holder's fencing token, or the last one if free (0 if none is known)
	Waiters     int      // waiters registered on the server
	NextWaiters []string // owner ids of the first few, in the order a release picks them

	holdID string
}

// stateWaiters is how many waiters State names.
const stateWaiters = 5

// State reads the mutex's state in one round trip: whether anyone holds it,
// who, how many holds ctx's owner (or the newest ownerless hold taken
// through m) has, the remaining lease, the fencing token and the waiters.
func (m *Mutex) State(ctx context.Context) (State, error) {
	if err := m.h.Begin("state", ctx); err != nil {
		return State{}, err
	}
	owner, _ := m.h.Current(ctx, core.Exclusive)
	reply, err := m.h.B.Eval(ctx, inspectScript, m.keys, m.h.QueryArgs(owner, stateWaiters)...)
	if err != nil {
		return State{}, m.h.Wrap("state", err)
	}
	s, err := decodeState(reply)
	return s, m.h.Wrap("state", err)
}

func decodeState(reply any) (State, error) {
	r, err := backend.Array(reply, 8)
	if err != nil {
		return State{}, err
	}
	var n [7]int64
	for _, i := range []int{0, 1, 2, 3, 5, 6} {
		if n[i], err = backend.Int(r[i]); err != nil {
			return State{}, err
		}
	}
	holder, err := backend.String(r[4])
	if err != nil {
		return State{}, err
	}
	s := State{Locked: n[0] == 1, HoldCount: int(n[1]), Holder: holder, HolderCount: int(n[5]), Token: n[3], Waiters: int(n[6])}
	switch {
	case n[2] >= 0:
		s.TTL = time.Duration(n[2]) * time.Millisecond
	case n[2] == -1:
		s.TTL = -1
	}
	s.holdID, _ = r[7].(string)
	for _, v := range r[8:] {
		w, err := backend.String(v)
		if err != nil {
			return State{}, err
		}
		s.NextWaiters = append(s.NextWaiters, w)
	}
	return s, nil
}

// IsLocked reports whether any owner holds the mutex.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	s, err := m.State(ctx)
	return s.Locked, err
}

// HoldCount returns how many holds ctx's owner (or the newest ownerless
// hold taken through m) has on the server: 0 when it holds none.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	s, err := m.State(ctx)
	return s.HoldCount, err
}

// TTL returns the remaining lease of the current hold, whoever holds it,
// or 0 if the mutex is free.
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
	s, err := m.State(ctx)
	return s.TTL, err
}

// ForceUnlock takes the mutex from whoever holds it, however many times,
// and hands it to the next waiter if there is one, as a release does. It
// reports whether the mutex was held. A holder in this process learns of
// the loss at once through Done; one in another process at its next
// renewal, or, on a fixed lease, when the lease ends. Use it to recover
// from a known-dead holder that did not set a lease short enough.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	return m.h.ForceUnlock(ctx, 0, &m.force)
}

// ForceUnlockToken is ForceUnlock for one hold only: it takes the mutex
// only if its current hold has the fencing token token, as read by State,
// so that a hold taken since is left alone. It reports whether it took it.
func (m *Mutex) ForceUnlockToken(ctx context.Context, token int64) (bool, error) {
	return m.h.ForceUnlockToken(ctx, token, &m.force)
}
