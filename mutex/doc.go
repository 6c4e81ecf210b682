// Package mutex provides a reentrant mutual exclusion lock shared through
// a Redis-compatible server: Redisson's RLock, in Go.
//
//	mu := mutex.New(b, "orders:42")
//	mu.Lock()
//	defer mu.Unlock()
//
// A *Mutex is a sync.Locker and a dsync.Locker. Any number of handles, in
// any number of processes, may refer to the same name; they exclude one
// another. Make one per name and keep it (see Handles in package dsync).
//
// LockScope returns the hold as a context that is cancelled when the hold
// is lost, so that work done with it stops (see Holds as contexts in
// package dsync):
//
//	ctx, unlock, err := mu.LockScope(ctx)
//	if err != nil {
//		return err
//	}
//	defer unlock()
//	return work(ctx)
//
// # Owners and reentrancy
//
// A hold belongs to an owner, carried by the context (dsync.WithOwner), and
// to the backend value it was taken through, as a Redisson lock belongs to
// its client: LockContext with an owner re-enters when the owner already
// holds the mutex, and the owner must unlock as many times as it locked,
// through any handle on the same backend value. An unlock through a handle
// on another backend value of the process is refused with an error
// matching dsync.ErrNotHeld that says so, and leaves the hold as it was;
// so are Token and Done. An owner that re-enters through a second backend
// value on the same server counts one hold more on the server, which that
// backend value releases.
//
// Lock, and LockContext with a context that has no owner, take an ownerless
// hold: not reentrant, exactly like sync.Mutex (a second Lock blocks), and
// released by Unlock on the same handle from any goroutine. A handle keeps
// its ownerless holds in the order they were taken, lost ones included,
// and each Unlock releases the oldest: a goroutine whose hold was lost and
// that unlocks late consumes its own lost hold, never the next holder's.
// Every Lock must therefore be paired with one Unlock, as with sync.Mutex.
//
// # Leases, the watchdog and the lost signal
//
// Every hold has a lease on the server, so a holder that crashes frees the
// mutex by itself. By default the lease is 30s and a watchdog renews it
// every 10s while the mutex is held; one scheduler per backend renews all
// holds in batched calls. WithWatchdog changes the lease; WithLease makes it
// fixed, never renewed.
//
// A hold can be lost: a fixed lease expires, renewals fail until the lease
// runs out (the server was unreachable), or the key vanished (ForceUnlock,
// a flush, a failover that lost the write). Done returns a channel that is
// closed when that happens, as well as on the final unlock. It closes a
// margin before the lease ends on the server (WithExpiryMargin; 1% of the
// lease plus 2ms by default), so that the holder is told before another
// owner can acquire the mutex even when its timer fires a little late.
// While it holds locks, a backend keeps a pub/sub subscription of its own:
// when that connection breaks and is made again, every hold on the backend
// is renewed (or, on a fixed lease, checked) at once, so a server that
// restarted without its data, or failed over to a replica that lacked the
// hold, is noticed within a round trip of its return rather than at the
// next renewal. Redisson only
// logs a loss; here the holder is told, and should stop touching the
// resource. After a loss, UnlockContext returns an error matching
// dsync.ErrNotHeld, and Unlock logs instead of panicking; except within
// the expiry margin of a lease that ran out, when the hold may still be on
// the server: the unlock then still releases it, and returns nil if it did.
//
// A release does not depend on the caller's cancellation: UnlockContext
// with a context that has ended (a request's, in a deferred unlock) still
// releases, bounded by a few seconds of its own and by the hold's lease.
// The call itself keeps ctx's deadline (see the package dsync
// documentation): it returns by then plus 100ms, and a release whose
// outcome is not known by then goes on in the background. If the release
// fails, the watchdog stops and Done is closed: the hold expires by itself
// within one lease.
//
// # Fencing tokens
//
// A lease is not a mutex: a holder paused (GC, swap, a slow network) past
// its lease can still act while another process holds the mutex. Every
// acquisition therefore gets a fencing token, returned by Token: a number
// that strictly increases from one hold to the next, whoever takes it, and
// stays the same on re-entry. Pass it with every write to the protected
// resource, and have the resource reject a write whose token is lower than
// the highest it has seen:
//
//	UPDATE orders SET ..., fence = $token WHERE id = 42 AND fence <= $token
//
// Tokens are taken in the same script that grants the hold, and each is
// the previous one plus one. The last token is kept at the lock key while
// held and, once released, for the rest of the released hold's lease. A
// mutex whose key is gone (unused for longer, a hold that expired, a key
// deleted or evicted) starts again from the server time in microseconds,
// which is above every earlier token unless the server's clock stepped
// back by more than the time since that token was handed out. Keeping the
// token in a key of its own would survive that too, at the price of a
// write on every acquisition; the hot path is kept to one read and one
// write per acquisition, and one write per release.
//
// # Waiting
//
// A blocked LockContext does not poll. A waiter registers on the server
// and waits for a wake-up on the mutex's channel (one subscription per
// backend, shared by all local waiters), for the holder's lease to run out,
// or for its heartbeat (5s), whichever comes first. The final unlock hands
// the mutex to a waiter in the same script, with a fresh fencing token, and
// wakes it; the waiter returns without another round trip, so a client
// that unlocks and locks again in a loop cannot starve the others. A grant
// is accepted only if it is newer than every hold the waiter saw, the one
// its latest attempt found included, and is otherwise confirmed by one more
// attempt: a wake-up delayed past the hold's expiry is refused. A hold
// handed to a waiter starts on a lease of at most 2s, which the waiter's
// watchdog extends at its first renewal, so a waiter that died holds the
// mutex for only that long; the other waiters, who are not woken by a
// hand-off to someone else, notice at their next attempt: within their
// heartbeat (5s) of the hand-off. A waiter that gives up passes on a hold
// handed to it.
//
// The waiter handed the mutex is the one that has gone longest without an
// attempt: usually the longest waiting, but the order is not promised
// (package fairlock grants strictly in arrival order). Goroutines of one
// process that contend for a mutex held in the same process queue in the
// process first (behind a hold taken through the same backend value), and
// the release registers them on the server: a contended acquisition within
// a process usually costs one round trip, and waiters of other processes
// that registered meanwhile go first.
//
// While the server cannot be reached, Lock keeps trying with capped
// backoff and logs at Warn, once and then every minute.
//
// # Keys
//
// The mutex "orders:42" under the default prefix uses
//
//	dsync:mutex:{orders:42}            string: the hold (token, count,
//	                                   owner, hold id, recent operation
//	                                   ids); expires with the lease. Freed,
//	                                   only the last token, for the rest
//	                                   of the released hold's lease
//	dsync:mutex:{orders:42}:waiters    sorted set of waiters; expires 15s
//	                                   after the last registration
//	dsync:mutex:{orders:42}:wake/<id>  pub/sub channel of one backend value
//
// all in one Redis Cluster slot. Once the mutex is free only the lock key
// holding the last token is left, about 50 bytes, and not for longer than
// the lease. A value at the lock key that dsync did not write, or a key of
// another type, is reported as dsync.ErrUnexpectedReply and left
// untouched. The scripts need Redis 6.2 or later (SET ... KEEPTTL GET).
//
// An uncontended Lock and Unlock cost two round trips and five server
// commands: one script call each, a read and a write in the first, one
// write in the second.
//
// # Errors
//
// Every error names the operation and the mutex and matches, with
// errors.Is, a sentinel of package dsync or the context's error. Bad
// arguments are reported before any I/O. Operations whose reply is lost are
// retried with the same operation id, so a retried acquisition does not
// count twice and a retried release does not release twice, nor release
// the same owner's next hold; an acquisition that is given up is undone.
// The server remembers an owner's recent operation ids on a hold for 30s
// (an acquisition's for 30s more than its lease, which covers any outage
// the hold survives), up to 128 of them: an owner that runs more than that
// many operations on one mutex while one of its replies is lost may see
// the retried one counted twice.
package mutex
