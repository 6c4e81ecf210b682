package dsync

import "errors"

// Sentinel errors returned, possibly wrapped, by every dsync package. Match
// them with errors.Is. Context errors are passed through unwrapped in
// meaning: errors.Is(err, context.DeadlineExceeded) holds when a wait ran
// out of time.
var (
	// ErrNotHeld reports an unlock, release or query by an owner that does
	// not hold the primitive: never locked, already unlocked, unlocked once
	// too often, held by someone else, or lost when its lease expired.
	ErrNotHeld = errors.New("dsync: not held by this owner")

	// ErrUpgrade reports a read holder asking for the write lock of the
	// same read-write lock, which would deadlock.
	ErrUpgrade = errors.New("dsync: read lock cannot be upgraded to write lock")

	// ErrInvalidName reports an empty or oversized name or key prefix.
	ErrInvalidName = errors.New("dsync: invalid name")

	// ErrInvalidLease reports a zero, negative or sub-millisecond lease.
	ErrInvalidLease = errors.New("dsync: invalid lease")

	// ErrInvalidPermits reports a permit count that is not positive or
	// exceeds the capacity.
	ErrInvalidPermits = errors.New("dsync: invalid permit count")

	// ErrInvalidBackend reports a nil backend.
	ErrInvalidBackend = errors.New("dsync: invalid backend")

	// ErrClosed reports use of a backend after Close.
	ErrClosed = errors.New("dsync: backend closed")

	// ErrInvalidMembers reports a multi-lock made of no locks, a nil lock,
	// or the same lock twice.
	ErrInvalidMembers = errors.New("dsync: invalid multi-lock members")

	// ErrNoLeader reports an election in which no term is on: nobody
	// leads.
	ErrNoLeader = errors.New("dsync: no leader")

	// ErrAbandoned reports units of a wait group (package waitgroup)
	// whose owner's lease ran out before it counted them down: its
	// process died, or could not reach the server for a lease. The error
	// names the owner and its units (*waitgroup.AbandonedError).
	ErrAbandoned = errors.New("dsync: abandoned by an owner whose lease ran out")

	// ErrUnexpectedReply reports a server reply whose shape the caller did
	// not expect, typically from an adapter that breaks the reply contract
	// or a key that was overwritten by something other than dsync.
	ErrUnexpectedReply = errors.New("dsync: unexpected reply")
)
