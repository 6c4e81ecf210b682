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
// the lock held, or free with others queued: its place is one past the
// last entry's, taken by the server, never from a client clock. The final
// release hands the lock to the head of the queue in the same script, with
// a fresh fencing token, and wakes that waiter alone: a release costs the
// same few commands and one message whatever the queue's length. Nobody
// takes the lock out of turn: TryLockContext, and a new LockContext,
// succeed on a free lock only if no live waiter is queued. An owner that
// already holds the lock re-enters at once, without queueing.
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
// Pick fairlock over mutex when no waiter may be overtaken: when tail
// latency matters more than throughput, or a client that unlocks and locks
// again in a loop must not keep the lock from the others. A mutex waiter
// is served roughly in order too, but not promised, and the mutex's
// queueing within a process makes a contended acquisition cheaper. The
// price of the order is a queue of two sorted sets per lock on the server,
// and a few more commands per contended acquisition (an uncontended one
// costs what the mutex's does); bench/README.md measures it.
//
// # Fencing tokens
//
// Tokens are kept as package mutex keeps them: by the lock key, while held
// and once freed for the rest of the released hold's lease; a lock whose
// key is gone seeds its next token from the server clock in microseconds.
// There is no fence key (and no WithFenceTTL): one more key written on
// every grant bought only the case of a server clock that steps back while
// the lock is free, which the clock seed leaves as it is for the mutex.
//
// # Keys
//
// The lock "reports" under the default prefix uses
//
//	dsync:fairlock:{reports}          string: the hold, as in package mutex;
//	                                  freed, only the last token, for the
//	                                  rest of the released hold's lease
//	dsync:fairlock:{reports}:queue    sorted set: waiters by arrival
//	dsync:fairlock:{reports}:expiry   sorted set: waiters by expiry
//	dsync:fairlock:{reports}:wake/<id> pub/sub channel of one process
//
// all in one Redis Cluster slot. The queue keys vanish with their last
// waiter, or expire a waiter timeout after its last beat. A lock freed by
// a release that found nobody queued is taken with one read and one write
// on the server, and a hold nobody queued behind is freed with one write,
// as the mutex's: the queue is read only when a waiter joined it.
//
// # Errors
//
// As in package mutex: every error names the operation and the lock and
// matches a sentinel of package dsync or the context's error; bad
// arguments are reported before any I/O.
package fairlock
