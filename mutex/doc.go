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
// hold therefore has a fencing token, returned by Token: a number that
// strictly increases from one hold to the next, whoever takes it, and
// stays the same on re-entry. Pass it with every write to the protected
// resource, and have the resource reject a write whose token is lower than
// the highest it has seen:
//
//	UPDATE orders SET ..., fence = $token WHERE id = 42 AND fence <= $token
//
// A hold's token is drawn by the first script that needs it, each one more
// than the last drawn for the name. An uncontended Lock takes the mutex
// with one plain SET and draws no token: the first Token of such a hold
// costs one round trip (later calls, and holds handed over or re-entered,
// which draw theirs in their scripts, cost none). The last token is kept
// in the mutex's fence key for an hour after it was drawn (the fence ttl),
// so tokens keep increasing across holds that expired, keys deleted or
// evicted, and a server clock that steps back. Once the fence key is gone
// too, the next token starts from the server time in microseconds, which
// is above every earlier one unless the clock stepped back by more than
// the time since the last was drawn.
//
// # Two modes under contention
//
// The mutex works as Go's sync.Mutex does, across processes. In normal
// mode a release frees the mutex and wakes the waiter at the head of the
// queue, and whichever attempt reaches the server first takes it: a
// newcomer, or the releaser's own next Lock, may get there before the
// woken waiter, which then keeps its place at the head. That spares the
// next holder a wake-up's trip. Past the hand-off threshold
// (WithHandoffAfter; by default DefaultHandoffAfter, 1ms, Go's threshold)
// the mutex is in hand-off mode: a release hands it to the head waiter in
// the same script, with its wake-up, and newcomers queue behind it; an
// acquisition that finds the mutex free with such a waiter at the head
// hands it over too. When that happens depends on the hold released:
//
//   - A hold of the threshold or longer is handed to a head that has waited
//     the threshold since it queued. Under sustained contention the head
//     always has, and such holds pass from waiter to waiter in turn.
//   - A hold shorter than the threshold wakes a head not woken yet, whatever
//     its wait, and leaves the mutex free for the releaser's next plain
//     SET. While the woken head waits, releases of short holds wake nobody
//     and cost what an uncontended release costs; the head tries again 3
//     thresholds after its wake-up, and the next release then hands it the
//     mutex. The process that woke it (through the same Backend value,
//     whatever Mutex value) hands it over unasked at its first release
//     of the mutex past those 3 thresholds, so that a head whose process
//     died holds the others up for the hand-off lease (2s) and not until
//     its entry expires, as long as that process keeps retaking the
//     mutex; when another process retakes it instead, the waiters behind
//     notice at their heartbeat (5s), and the dead head's lease runs out
//     2s later. A hand-off between processes costs a wake-up, several
//     times a lock and unlock by one process, so with short holds the
//     mutex passes a few milliseconds at a time rather than at every
//     release: its rate is the releaser's, at the cost of each waiter's
//     wait, which bench/README.md measures.
//
// So no waiter waits longer than about 4 thresholds for itself and for
// each waiter queued before it (each of which, once at the head, lets
// short holds pass for 3 thresholds after its own wake-up), plus the holds
// of those waiters and one hold of a newcomer, plus a round trip or two
// for each wake-up. A head waiter that
// locks through the releaser's own Backend value (a goroutine of the same
// process sharing it) is handed the mutex whatever its wait: the release's
// reply wakes it in the process at no cost, where a wake-up would cost it
// an attempt's round trip, so the goroutines of a process that share a
// backend are served in turn, without attempts of their own.
// WithHandoffAfter(0) hands over at every release: the strict turn-taking
// of earlier versions. Each release wakes one waiter, never the herd.
// Package fairlock hands over at every release and never lets a newcomer
// in ahead of a waiter: pick it when the order of acquisitions must be the
// order of arrival.
//
// # Waiting
//
// A blocked LockContext does not poll. A waiter queues on the server, in
// arrival order, and waits for a wake-up on the mutex's channel (one
// subscription per backend, shared by all local waiters), for the holder's
// lease to run out, or for its heartbeat (5s), whichever comes first. A
// hand-off carries the hold in the wake-up, and the waiter returns without
// another round trip. A grant is accepted only if it is newer than every
// hold the waiter saw, the one its latest attempt found included, and is
// otherwise confirmed by one more attempt: a wake-up delayed past the
// hold's expiry is refused. A hold handed to a waiter starts on a lease of
// at most 2s, which the waiter's watchdog extends at its first renewal, so
// a waiter that died holds the mutex for only that long; the other
// waiters, who are not woken by a hand-off to someone else, notice at
// their next attempt: within their heartbeat (5s) of the hand-off. A
// waiter that gives up passes on a hold handed to it.
//
// Goroutines of one process that contend for a mutex held in the same
// process queue in the process first (behind a hold taken through the
// same backend value), and the release registers them on the server: a
// waiter queued in the process sends no registering attempt of its own,
// which is why a process's goroutines contend most cheaply through one
// backend value. A
// plain acquisition (one SET) does not look at the queue: after the lock
// key was lost (deleted, evicted, a failover), a waiter registered behind
// the lost hold finds the mutex at its next attempt, within its heartbeat.
//
// While the server cannot be reached, Lock keeps trying with capped
// backoff and logs at Warn, once and then every minute.
//
// # Keys
//
// The mutex "orders:42" under the default prefix uses
//
//	dsync:mutex:{orders:42}            string: the hold (owner and hold id;
//	                                   with waiters or a drawn token, also
//	                                   the token, the count and recent
//	                                   operation ids); expires with the
//	                                   lease. Free, it is gone, or, while
//	                                   a woken waiter is due, a marker
//	dsync:mutex:{orders:42}:queue      waiters in arrival order, and
//	dsync:mutex:{orders:42}:expiry     their expiry; 15s after the last
//	                                   registration
//	dsync:mutex:{orders:42}:fence      the last token drawn, for an hour
//	dsync:mutex:{orders:42}:wake/<id>  pub/sub channel of one backend value
//
// all in one Redis Cluster slot. A value at the lock key that dsync did
// not write, or a key of another type, is reported as
// dsync.ErrUnexpectedReply and left untouched. The scripts need Redis 6.2
// or later.
//
// An uncontended Lock and Unlock cost two round trips and four server
// commands, as a lock taken with SET NX and released by a script that
// compares and deletes does: a SET, and a script that runs a GET and a
// DEL. With a backend that does not implement backend.Setter, the SET is
// the fast path of the acquire script, which costs the server one script
// call more.
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
