package fairlock

import (
	"context"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
)

// Token returns the fencing token of the hold of ctx's owner (or of the
// newest ownerless hold taken through m). Tokens strictly increase from
// one hold to the next, whoever takes it; re-entering returns the same
// token. The first Token of a hold taken with one plain SET (an
// uncontended acquisition) draws its token on the server, one round trip
// bounded by ctx; otherwise it does no I/O. It returns an error matching
// dsync.ErrNotHeld if there is no such hold or it was lost.
func (m *Mutex) Token(ctx context.Context) (int64, error) {
	return m.h.Token(ctx, &m.hold)
}

// Done returns a channel that is closed when the hold of ctx's owner (or
// the newest ownerless hold taken through m) ends, lost or released by its
// final unlock. If there is no such hold, the channel is already closed.
// It does no I/O.
func (m *Mutex) Done(ctx context.Context) <-chan struct{} {
	return m.h.Done(ctx, core.Exclusive)
}

// State is a snapshot of a fair lock on the server.
type State struct {
	Locked    bool
	HoldCount int           // holds of the asking owner; 0 for any other
	TTL       time.Duration // remaining lease; -1 if the key has no expiry

	Holder      string // the holder's owner id; "" if free
	HolderCount int    // the holder's hold count
	Token       int64  // the holder's fencing token, or the last one if free (0 if none is known)
	Queued      int    // live waiters in the queue
	Position    int    // the asking owner's place in the queue: 1 at the head, 0 if not queued
}

// State reads the lock's state in one round trip. Position is that of the
// first waiter of ctx's owner, such as a LockContext with the same owner
// waiting in another goroutine.
func (m *Mutex) State(ctx context.Context) (State, error) {
	if err := m.h.Begin("state", ctx); err != nil {
		return State{}, err
	}
	owner, _ := m.h.Current(ctx, core.Exclusive)
	reply, err := m.h.B.Eval(ctx, inspectScript, m.keys, m.h.QueryArgs(owner)...)
	if err != nil {
		return State{}, m.h.Wrap("state", err)
	}
	n, err := backend.Array(reply, 9)
	if err != nil {
		return State{}, m.h.Wrap("state", err)
	}
	var v [8]int64
	for _, i := range []int{0, 1, 2, 3, 5, 6, 7} {
		if v[i], err = backend.Int(n[i]); err != nil {
			return State{}, m.h.Wrap("state", err)
		}
	}
	holder, err := backend.String(n[4])
	if err != nil {
		return State{}, m.h.Wrap("state", err)
	}
	s := State{Locked: v[0] == 1, HoldCount: int(v[1]), Holder: holder, HolderCount: int(v[5]), Token: v[3], Queued: int(v[6]), Position: int(v[7])}
	switch {
	case v[2] >= 0:
		s.TTL = time.Duration(v[2]) * time.Millisecond
	case v[2] == -1:
		s.TTL = -1
	}
	return s, nil
}

// IsLocked reports whether any owner holds the lock.
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
// or 0 if the lock is free.
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
	s, err := m.State(ctx)
	return s.TTL, err
}

// ForceUnlock takes the lock from whoever holds it, however many times,
// and hands it to the head of the queue, as a release does. It reports
// whether the lock was held. A holder in this process learns of the loss
// at once through Done; one in another process at its next renewal, or,
// on a fixed lease, when the lease ends.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	return m.h.ForceUnlock(ctx, 0, &m.force)
}

// ForceUnlockToken is ForceUnlock for one hold only: it takes the lock
// only if its current hold has the fencing token token, as read by State,
// so that a hold taken since is left alone. It reports whether it took it.
func (m *Mutex) ForceUnlockToken(ctx context.Context, token int64) (bool, error) {
	return m.h.ForceUnlockToken(ctx, token, &m.force)
}
