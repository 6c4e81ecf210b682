package mutex

import (
	"context"
	"fmt"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Token returns the fencing token of the hold of ctx's owner (or of the
// ownerless hold taken through m). Tokens strictly increase from one hold
// of the mutex to the next, whoever takes it; re-entering returns the same
// token. It does no I/O, and returns an error matching dsync.ErrNotHeld if
// there is no such hold or it was lost.
func (m *Mutex) Token(ctx context.Context) (int64, error) {
	l, err := m.lease(ctx)
	if err != nil {
		return 0, err
	}
	return l.Token(), nil
}

// Done returns a channel that is closed when the hold of ctx's owner (or
// the ownerless hold taken through m) ends: lost, because a renewal found
// it gone or renewals failed until its lease ran out, or released by its
// final unlock. If there is no such hold, the channel is already closed.
// It does no I/O.
func (m *Mutex) Done(ctx context.Context) <-chan struct{} {
	if l, _ := m.lease(ctx); l != nil {
		return l.Done()
	}
	return closed
}

var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (m *Mutex) lease(ctx context.Context) (*lease.Lease, error) {
	if err := m.check(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	owner, _ := m.holder(ctx)
	if owner == "" {
		return nil, m.wrap("token", dsync.ErrNotHeld)
	}
	l := lease.Get(m.b, m.key, owner)
	if l == nil {
		return nil, m.wrap("token", dsync.ErrNotHeld)
	}
	if l.Lost() {
		return l, m.wrap("token", fmt.Errorf("%w: %w", dsync.ErrNotHeld, errLost))
	}
	return l, nil
}

// State is a snapshot of a mutex on the server.
type State struct {
	Locked    bool
	HoldCount int           // holds of the asking owner; 0 for any other
	TTL       time.Duration // remaining lease; -1 if the key has no expiry
}

// State reads the mutex's state in one round trip: whether anyone holds it,
// how many holds ctx's owner (or the ownerless hold taken through m) has,
// and the remaining lease.
func (m *Mutex) State(ctx context.Context) (State, error) {
	if err := m.check(ctx); err != nil {
		return State{}, err
	}
	owner, _ := m.holder(ctx)
	reply, err := m.b.Eval(ctx, inspectScript, []string{m.key}, owner)
	if err != nil {
		return State{}, m.wrap("state", err)
	}
	r, err := backend.Ints(reply, 3)
	if err != nil {
		return State{}, m.wrap("state", err)
	}
	s := State{Locked: r[0] == 1, HoldCount: int(r[1])}
	switch {
	case r[2] >= 0:
		s.TTL = time.Duration(r[2]) * time.Millisecond
	case r[2] == -1:
		s.TTL = -1
	}
	return s, nil
}

// IsLocked reports whether any owner holds the mutex.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	s, err := m.State(ctx)
	return s.Locked, err
}

// HoldCount returns how many holds ctx's owner (or the ownerless hold
// taken through m) has on the server: 0 when it holds none.
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
// reports whether the mutex was held. The holder learns of the loss at its
// next renewal, through Done. Use it to recover from a known-dead holder
// that did not set a lease short enough.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	m.dropAll()
	n, err := wait.HandOff(ctx, m.b, m.channel, forceScript, m.handedFrom(nil), []string{m.key, m.waiters, m.fence},
		m.channel, ms(FenceTTL), hub.Process())
	if err != nil {
		return false, m.wrap("force unlock", err)
	}
	return n == 1, nil
}
