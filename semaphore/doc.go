// Package semaphore provides a counting semaphore shared through a
// Redis-compatible server, whose permits are leased: the permits of a
// holder that crashed come back when its lease ends.
//
//	sem := semaphore.New(b, "api-quota", 10)
//	if err := sem.Acquire(ctx, 1); err != nil {
//		return err
//	}
//	defer sem.Release(ctx, 1)
//
// The method set follows golang.org/x/sync/semaphore's Weighted, with a
// context first in every call that does I/O: Acquire(ctx, n),
// TryAcquire(ctx, n), Release(ctx, n), plus State, Available, Capacity,
// SetCapacity and Done; and portable permits, released by id from any
// process: AcquirePermit, ReleasePermit, ExtendPermit.
//
// # Owners and leases
//
// Permits are held by an owner, as the locks of dsync are: ctx's owner
// (dsync.WithOwner), or with no owner in ctx, a fresh owner for each
// Acquire, which the handle remembers. An owner holds one hold with a
// count of permits on the server, under one lease: the watchdog renews it
// while held (WithWatchdog, 30s by default, renewed every third of it, in
// the same batched renewals as the locks), or it is fixed (WithLease) and
// ends that long after the owner's last acquisition. An owner acquiring
// again adds to its count and extends its lease; it does not skip the
// queue. Done reports the end of an owner's permits: lost when the lease
// ran out or the server lost them, or all given back. An owner that asks
// for more than the capacity less what it holds waits until ctx ends, as
// with x/sync's Weighted: nobody else can give it those permits.
//
// An ownerless Release(n) gives back n of the ownerless permits acquired
// through the same handle, from any goroutine, as with x/sync's Weighted:
// from the oldest acquisition first, over as many as it takes; each stays
// remembered until all its permits are back. A Release with an owner gives
// back that owner's permits, through any handle on the backend value they
// were taken through.
// Releasing more than is held is an error matching dsync.ErrNotHeld, and
// releases nothing; so is an ownerless release that would include permits
// whose lease ended, which forgets those and leaves the live ones held. A release retried after a lost reply is applied once
// (operation ids, as for the locks), and runs detached from ctx's
// cancellation, so that a deferred Release in a request whose context
// ended still gives the permits back.
//
// # Order
//
// Requests are served first come, first served, by the order they reached
// the server (a FIFO queue, as for fairlock): a request that does not fit
// waits at its place, and requests behind it wait too, however small, as
// in golang.org/x/sync/semaphore. So a large request is never starved by a
// stream of small ones; the price is that small requests may wait while
// permits are free. A request's place is the one its acquire script gives
// it: a first attempt that is a plain SET NX (see Keys) and finds the
// semaphore in use queues by the script it sends next. TryAcquire succeeds
// only if the permits are free and nobody is queued. The script that frees
// permits (a release, an abandoned wait, a raised capacity, or any script
// that finds a lease ended) hands them to as many waiters from the head as
// fit, and wakes each through pub/sub: a waiter never polls. A waiter's
// place lasts the waiter timeout (WithWaiterTimeout, 5s) past its last
// heartbeat, as in fairlock; permits handed to a waiter start on a lease
// of at most 2s, which the waiter extends at once. A waiter with an owner
// from ctx confirms a hand-off with one more round trip, which tells it
// the hold the permits joined: other goroutines of its owner may have been
// handed permits at once. A waiter held up behind one whose process died
// looks again when that waiter's place ends, not at its own next
// heartbeat.
//
// # Portable permits
//
// AcquirePermit returns a Permit: one permit named by an unguessable id
// (dsync.NewID) rather than held by an owner, which ReleasePermit gives
// back and ExtendPermit extends by that id, from any process and through
// any backend value on the same server, without the acquiring handle, as
// Redisson's RPermitExpirableSemaphore does. On the server it is a hold of
// one permit whose owner (and hold id) is the id: it waits its turn in the
// same queue and counts against the same capacity as owners' permits. Its
// lease is fixed, the acquiring handle's lease (WithLease, or
// WithWatchdog's d); no watchdog renews it and no Done tells of its end:
// it is returned by itself when its lease runs out, unless ExtendPermit
// pushed its end further. Releasing or extending an id that is not held
// (released, lapsed, or never acquired) is an error matching
// dsync.ErrNotHeld and changes nothing; a release retried after a lost
// reply is applied once.
//
// # Capacity
//
// New's capacity is the handle's. The first acquisition on a free
// semaphore records it with the semaphore's state on the server; while the
// state lives (any permit held or waiter queued), an acquisition through a
// handle with another capacity fails with ErrCapacityMismatch: two
// processes configured differently learn it instead of sharing a
// semaphore of unclear size. The recorded capacity binds no longer once
// every permit is free and nobody is queued (the state may outlive that
// for a while: the next acquisition records its handle's), unless a
// capacity is set at runtime.
//
// SetCapacity changes the capacity at runtime for every handle: it is kept
// on the server without expiry, with the semaphore's state (the keys that
// outlive a free semaphore, by design: see Keys), overrides the handles'
// capacities, and suspends the mismatch check; SetCapacity(ctx, 0) removes
// it. A raised capacity serves waiters at once. A lowered one revokes
// nothing: holders above it keep their permits until they give them back,
// and nobody acquires until the permits held fall below the new capacity;
// a waiter asking for more than the new capacity fails with
// dsync.ErrInvalidPermits. A handle still rejects n above its own capacity
// before any I/O.
//
// Versions of dsync before the plain acquisition (see Keys) kept a
// runtime capacity on a free semaphore as the capacity key alone, which a
// plain acquisition does not read: after upgrading, call SetCapacity again.
// Processes of both kinds must not share a semaphore: the earlier kind's
// waiters do not keep the state that the later kind's plain acquisitions
// test.
//
// # Keys
//
// The semaphore "api-quota" under the default prefix uses
//
//	dsync:semaphore:{api-quota}           the state (below)
//	dsync:semaphore:{api-quota}:holders   sorted set: owners by lease end
//	dsync:semaphore:{api-quota}:queue     sorted set: waiters by arrival
//	dsync:semaphore:{api-quota}:expiry    sorted set: waiters by expiry
//	dsync:semaphore:{api-quota}:capacity  the runtime capacity, if set
//	dsync:semaphore:{api-quota}:wake/<id> pub/sub channel of one process
//
// all in one Redis Cluster slot. The state takes one of two forms. While
// at most one owner holds permits, nobody is queued and no capacity is set
// at runtime, it is one string that expires with that owner's lease. As
// soon as a second owner holds, a waiter queues or a capacity is set at
// runtime it becomes a hash (capacity, permits held, grant counter, and
// per owner its permits, hold id and recent ops) with the holders' leases
// in the holders key, until every permit is free again.
//
// An uncontended Acquire and its Release cost two round trips and four
// server commands, as the mutex's Lock and Unlock: the Acquire is one
// plain SET NX of the state key (through a backend that implements
// backend.Setter; else the fast path of the acquire script, one script
// call more), and the Release a script that compares and deletes it. That
// rests on one promise the scripts keep: a missing state means that no
// permit is held, no live waiter is queued and no capacity is set at
// runtime. The state lives as long as the latest lease and at least as
// long as every queued waiter's place (each heartbeat extends it), and
// while a capacity is set at runtime it has no expiry. A handle whose
// acquisition found the semaphore in use asks the script first from then
// on, one round trip, until the script finds the semaphore free again.
//
// A free semaphore keeps none of its keys, unless a capacity is set at
// runtime: then the capacity key and the state (a hash with no permits
// held) stay until SetCapacity(ctx, 0) deletes them (a state still in use
// gets its expiry back then). Otherwise the state and holders are deleted
// when the last permit is given back with nobody queued, and expire with
// the latest lease or waiter's place if every holder and waiter died; the
// queue keys vanish with their last waiter, or a waiter timeout after its
// last beat.
//
// A key that vanishes otherwise (deleted, or evicted under maxmemory)
// costs no permit for good: without the state or the holders, the permits
// they counted are free again at the next acquisition or release, and
// their holders are told (Done) at their next renewal; without a queue
// key, waiters queue again at their next heartbeat, in the order their
// heartbeats come. What moves is order and the runtime capacity, as a
// mutex's key deleted under its waiters lets in the next plain
// acquisition: with the state gone while waiters are queued, one plain
// acquisition may take permits ahead of them, until the next waiter's
// heartbeat writes the state again; with the state gone while a capacity
// is set at runtime, plain acquisitions go by their handle's capacity,
// until a script that reads the capacity key (an acquisition that finds
// the semaphore in use, a waiter's heartbeat, SetCapacity) writes the
// state again. While a capacity is set at runtime the state and capacity
// keys have no expiry, so that the volatile-* eviction policies never take
// them; allkeys-* may, and without the capacity key the capacity in force
// is the handles' again.
//
// There is no fencing token: a permit is not exclusive. The grant counter
// only tells a waiter whether a hand-off is newer than its last failed
// attempt; it is drawn as a token is (see package mutex) whenever a state
// needs it.
//
// # Errors
//
// Every error names the operation and the semaphore and matches a
// sentinel of package dsync (ErrInvalidPermits, ErrNotHeld, ...),
// ErrCapacityMismatch or the context's error; bad arguments are reported
// before any I/O. There is no fencing token and no ForceRelease.
package semaphore
