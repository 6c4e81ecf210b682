// Package fairlock provides a reentrant mutual exclusion lock, shared
// through a Redis-compatible server, that is granted strictly in the order
// waiters reached the server.
//
//	lock := fairlock.New(b, "reports")
//	lock.Lock()
//	defer lock.Unlock()
//
// A *Mutex has the method set of mutex.Mutex: it is a sync.Locker and a
// dsync.Locker, reentrant per owner (dsync.WithOwner), with a watchdog lease
// (WithWatchdog) or a fixed one (WithLease), a lost signal (Done), fencing
// tokens (Token) and State, which also reports the queue's length and the
// asking owner's place in it. See package mutex for owners, leases, the
// lost signal and fencing tokens; they work the same here.
//
// # Order
//
// A waiter joins the queue when its attempt reaches the server and finds
// the lock held, or free with others queued: its place is after the last
// entry's, by the server's clock, never a client's. The final
// release hands the lock to the head of the queue in the same script, with
// a fresh fencing token, and wakes that waiter alone: a release costs the
// same few commands and one message whatever the queue's length. Nobody
// takes the lock out of turn: TryLockContext, and a new LockContext,
// succeed on a free lock only if no live waiter is queued, also once the
// hold the waiters queued behind ran out without a release (see Keys). An
// owner that already holds the lock re-enters at once, without queueing.
//
// A waiter's place is that of its registration. The first attempt of an
// acquisition is one plain SET NX where the backend has backend.Setter
// (see Keys): on a held lock it registers nothing, and the acquire script
// that follows at once does; another acquisition whose script reaches the
// server between the two queues ahead of it.
//
// A waiter's place lasts the waiter timeout (WithWaiterTimeout, 5s by
// default) past its last heartbeat, and it beats every third of that while
// it waits: a live waiter keeps its place however long it waits, its place
// never moves when it beats, and a waiter whose process died is skipped
// once its place expires. A hold handed to a waiter starts on a lease of at
// most 2s and never more than the waiter timeout, which the waiter's
// watchdog extends at its first renewal; a waiter that died since its last
// heartbeat therefore holds the queue up by at most that. A waiter that
// gives up (its context ends) leaves the queue at once, and passes the lock
// on if it was just handed it.
//
// Unlike package mutex, goroutines of one process do not queue in the
// process first: every waiter takes its place on the server, so that the
// order is the server's.
//
// # When to pick fairlock
//
// Pick fairlock over mutex when no waiter may be overtaken: when the order
// of acquisitions must be the order of arrival, or a client that unlocks
// and locks again in a loop must never get the lock ahead of one that
// waits. The mutex works as Go's sync.Mutex does (see "Two modes under
// contention" in package mutex): a release frees it and a newcomer may
// take it ahead of the woken waiter, until that waiter is due (past a
// threshold, 1ms by default, or 3 thresholds after its wake-up while holds
// are shorter than the threshold), at the cost of order, with every
// waiter still served within about 4 thresholds for itself and for each
// waiter queued before it, plus their holds
// (goroutines that share the releaser's backend value are served in
// turn, as here).
// fairlock hands the lock over at every release, so between two holders it
// sits idle for a wake-up, as the mutex does under sustained contention,
// when its head waiter has always waited past the threshold.
// bench/README.md measures both.
//
// # Fencing tokens
//
// Tokens are drawn and kept as package mutex draws and keeps them: an
// uncontended acquisition takes the lock with one plain SET (when nobody
// is queued) and its token is drawn by the first Token, and the fence key
// keeps the last one for an hour after it was drawn.
//
// # Keys
//
// The lock "reports" under the default prefix uses
//
//	dsync:fairlock:{reports}          string: the hold, as in package mutex;
//	                                  there while a live waiter is queued;
//	                                  else gone when the lock is free
//	dsync:fairlock:{reports}:queue    sorted set: waiters by arrival
//	dsync:fairlock:{reports}:expiry   sorted set: waiters by expiry
//	dsync:fairlock:{reports}:fence    the last token drawn, for an hour
//	dsync:fairlock:{reports}:wake/<id> pub/sub channel of one process
//
// all in one Redis Cluster slot. The queue keys vanish with their last
// waiter, or expire a waiter timeout after its last beat.
//
// The lock key exists whenever a live waiter is queued, so that a missing
// key means a lock nobody waits for. A hold that a waiter queues behind
// records its end in its value, and its key lives on past that end for as
// long as the last waiter's place lasts (and 2ms more): once its end has
// passed, the hold is gone (its holder's renewal and release find it so,
// and State reports the lock free, with the hold's token as the last),
// but the key still keeps newcomers out. Every heartbeat of a waiter
// pushes the key's expiry past its place's, and one that finds the key
// missing while the lock is free writes a free marker ("<token> free")
// there. A hold handed to a waiter on the hand-off lease is kept so too.
// When the last waiter leaves or dies, the key goes with the hold, or with
// the waiter's place.
//
// So an uncontended Lock is one plain SET NX PX of the lock key, as the
// mutex's, through a backend with backend.Setter (elsewhere a script that
// runs that SET), and an uncontended Unlock a script that GETs and DELs
// it: four server commands in two round trips; the queue is read only
// when a waiter joined it. A handle whose last acquisition met the lock
// held tries the script first. If the lock key is deleted or evicted
// behind dsync's back while waiters are queued, newcomers may take the
// lock ahead of them, one after another, until a waiter's next heartbeat
// (within a third of the waiter timeout) writes the key back, as a
// newcomer may take a mutex whose key vanished; their releases do not
// wake the waiters.
//
// Versions of dsync whose acquisitions checked the queue (before
// 2026-11-30) must not share a fair lock with this one: their hold's key
// expires with its lease though waiters are queued, and this version's
// plain SET NX would then take the lock ahead of them. Stop them all
// before starting this version.
//
// # Errors
//
// As in package mutex: every error names the operation and the lock and
// matches a sentinel of package dsync or the context's error; bad
// arguments are reported before any I/O.
package fairlock
