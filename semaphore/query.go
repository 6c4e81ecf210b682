package semaphore

import (
	"context"
	"fmt"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/lease"
)

// State is a snapshot of a semaphore on the server.
type State struct {
	// Capacity is the capacity in force: the one set at runtime
	// (SetCapacity), else the one of the handles that use it, else this
	// handle's.
	Capacity int64
	// Set reports whether Capacity was set at runtime.
	Set bool

	Held      int64 // permits held, by every owner
	Available int64 // Capacity - Held, or 0 while a lowered capacity is exceeded
	Holders   int   // owners holding permits
	Queued    int   // live waiters in the queue

	Permits  int64 // held by the asking owner
	Position int   // the asking owner's place in the queue: 1 at the head, 0 if not queued
}

// State reads the semaphore's state in one round trip. The asking owner
// is ctx's, or with no owner in ctx, that of the newest ownerless
// acquisition through s. Position is that of the first waiter of the
// owner, such as an Acquire with the same owner waiting in another
// goroutine. Permits whose lease ended are not counted, whether or not the
// server has given them back yet.
func (s *Semaphore) State(ctx context.Context) (State, error) {
	if err := s.valid(); err != nil {
		return State{}, err
	}
	if err := s.h.Begin("state", ctx); err != nil {
		return State{}, err
	}
	owner, _ := s.current(ctx)
	reply, err := s.h.B.Eval(ctx, inspectScript, s.keys, s.capacity, owner)
	if err != nil {
		return State{}, s.h.Wrap("state", err)
	}
	r, err := backend.Array(reply, 9)
	if err != nil {
		return State{}, s.h.Wrap("state", err)
	}
	var v [8]int64
	for i := range v {
		if v[i], err = backend.Int(r[i]); err != nil {
			return State{}, s.h.Wrap("state", err)
		}
	}
	st := State{Capacity: v[0], Held: v[1], Holders: int(v[2]), Permits: v[3], Queued: int(v[4]), Position: int(v[5]), Set: v[6] == 1}
	st.Available = max(0, st.Capacity-st.Held)
	return st, nil
}

// Available returns the permits free on the server now.
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	st, err := s.State(ctx)
	return st.Available, err
}

// Capacity returns the capacity in force on the server (see State).
func (s *Semaphore) Capacity(ctx context.Context) (int64, error) {
	st, err := s.State(ctx)
	return st.Capacity, err
}

// SetCapacity sets the semaphore's capacity at runtime, for every handle
// on it, in every process, until set again: it is kept on the server with
// no expiry, with the semaphore's state, even while no permit is held (see
// Keys in the package doc), and overrides the capacity handles were made
// with. c = 0 clears it, after which the handles' own capacity applies
// again (this handle's, for a semaphore in use), and a free semaphore
// keeps no key. c must be from 0 to MaxCapacity.
//
// A raised capacity hands the new permits to the waiters at the head of
// the queue at once. A lowered one takes no permit away: holders keep what
// they hold, and nobody acquires until the permits held fall below the
// new capacity. A waiter asking for more than it fails with an error
// matching dsync.ErrInvalidPermits. A handle still checks requests against
// its own capacity before any I/O.
func (s *Semaphore) SetCapacity(ctx context.Context, c int64) error {
	if err := s.valid(); err != nil {
		return err
	}
	if c < 0 || c > MaxCapacity {
		return s.h.Wrap("set capacity", fmt.Errorf("%w: capacity %d", dsync.ErrInvalidPermits, c))
	}
	if err := s.h.Begin("set capacity", ctx); err != nil {
		return err
	}
	_, err := s.h.HandOff(ctx, s.channel, capacityScript, s.keys, c, s.capacity, s.channel, s.h.HubID())
	return s.h.Wrap("set capacity", err)
}

// Done returns a channel that is closed when the permits of ctx's owner
// (or of the newest ownerless acquisition through s) end: lost, when their
// lease ran out or the state was deleted, or all given back. If there are
// no such permits, the channel is already closed. It does no I/O.
func (s *Semaphore) Done(ctx context.Context) <-chan struct{} {
	if s.valid() != nil {
		return closed
	}
	if _, l := s.current(ctx); l != nil {
		return l.Done()
	}
	return closed
}

var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// current returns the hold a query with ctx refers to: ctx's owner's, or
// the newest ownerless one taken through s (returned until given back,
// even when lost). The lease is nil if there is none.
func (s *Semaphore) current(ctx context.Context) (string, *lease.Lease) {
	if _, ok := dsync.OwnerFrom(ctx); ok {
		return s.h.Current(ctx, role)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.anon) == 0 {
		return "", nil
	}
	a := s.anon[len(s.anon)-1]
	return a.owner, a.l
}
