// Package mutex provides a reentrant mutual exclusion lock shared through
// a Redis-compatible server: Redisson's RLock, in Go.
//
//	mu := mutex.New(b, "orders:42")
//	mu.Lock()
//	defer mu.Unlock()
//
// A *Mutex is a sync.Locker and a dsync.Locker. Any number of handles, in
// any number of processes, may refer to the same name; they exclude one
// another.
//
// # Owners and reentrancy
//
// A hold belongs to an owner, carried by the context (dsync.WithOwner).
// LockContext with an owner re-enters when the owner already holds the
// mutex, through any handle in the process, and the owner must unlock as
// many times as it locked. Lock, and LockContext with a context that has no
// owner, take an ownerless hold: not reentrant, exactly like sync.Mutex (a
// second Lock blocks), and released by Unlock on the same handle from any
// goroutine.
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
// closed when that happens, as well as on the final unlock. Redisson only
// logs a loss; here the holder is told, and should stop touching the
// resource. After a loss, UnlockContext returns an error matching
// dsync.ErrNotHeld, and Unlock logs instead of panicking.
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
// the previous one plus one. The last token is kept on the server for
// FenceTTL (one hour) after the last acquisition, in a companion key that
// outlives a hold whose lease ran out and a server clock that steps back.
// A mutex unused for longer starts again from the server time in
// microseconds, which is above every earlier token unless the server's
// clock has stepped back meanwhile.
//
// # Waiting
//
// A blocked LockContext does not poll. A waiter registers on the server
// with its failed attempts and subscribes to the mutex's channel for its
// process (one subscription per backend, shared by all local waiters, kept
// for a second after the last one leaves). A waiter also retries when the
// holder's lease runs out and, as a heartbeat, every 5s; its entry expires
// 15s after its last attempt. When the pub/sub connection is
// re-established, every local waiter retries.
//
// The final unlock hands the mutex to a waiter, if there is one: in the
// same script, the hold becomes that waiter's, with a fresh fencing token,
// and the waiter is woken with the token, by a message if it is in another
// process, or by the unlocking goroutine from the script's reply if it is
// in the same one. It returns from LockContext on the wake-up alone,
// without another round trip, so the mutex passes on within the release's
// round trip (plus one pub/sub hop to another process), and a client that
// unlocks and locks again in a loop cannot starve the others. The waiter
// handed the mutex is the one that has gone longest without an attempt:
// usually the longest waiting, but the heartbeat reorders waiters, so the
// order is not promised (package fairlock grants strictly in arrival
// order). With no waiter queued, whoever asks first takes the mutex.
//
// A hold handed to a waiter starts on a lease of at most 2s (the fixed
// lease, under WithLease), which the waiter's watchdog extends to the full
// lease at its first renewal. A waiter that died since its last attempt
// therefore holds the mutex up for at most 2s, and the others notice by
// their next heartbeat. A waiter handed the mutex more than 1s after its
// last attempt cannot be sure the short lease still runs, and confirms the
// hold with one more attempt. A waiter that gives up (its context ends)
// just as the mutex is handed to it passes the mutex on.
//
// Goroutines of one process that contend for a mutex queue in the process
// first. While a hold of this process has the mutex, LockContext through a
// backend known to reach the same server (the one the hold was acquired
// through, or one through which the mutex was handed to it, or to a hold
// before it, in a chain of hand-offs within the process) does not ask the
// server, provided the process is still subscribed to the mutex's channel
// from a wait that ended less than a second ago: it queues behind the
// hold, and the hold's next release registers the queued waiters on the
// server, in their order, in the script that hands the mutex on. A
// contended acquisition within a process then usually costs one round
// trip, the release that hands the mutex over (two when the hand-off comes
// more than a second after the waiter queued, see above), and the process
// stays quiet while the mutex is held. Queued waiters are not on the
// server until that release, so waiters of other processes that
// registered meanwhile go before them. A queued waiter that is not handed
// the mutex asks the server itself when the hold's lease runs out or at
// its heartbeat.
//
// # Keys
//
// The mutex "orders:42" under the default prefix uses
//
//	dsync:mutex:{orders:42}            string: token, hold count, waiters
//	                                   flag, owner, recent operation ids;
//	                                   expires with the lease. Freed, only
//	                                   the last token, expiring after FenceTTL
//	dsync:mutex:{orders:42}:waiters    sorted set of waiters; expires 15s after
//	                                   the last registration, gone when empty
//	dsync:mutex:{orders:42}:fence      the last token; expires FenceTTL after
//	                                   the last acquisition
//	dsync:mutex:{orders:42}:wake/<id>  pub/sub channel of one process
//
// all in one Redis Cluster slot. A waiter's entry is its address, its
// hand-off lease and its owner id. Only the last token, in the lock key
// and the fence key, is left behind once the mutex is free. The state is
// one string rather than a hash so that taking or freeing the mutex is one
// SET with its expiry, and a freed lock key keeps the last token so that
// the next acquisition need not read the fence key: while it does, an
// uncontended lock and unlock run five commands inside their two scripts
// (GET, SET and the fence's SET; GET and SET). The scripts need Redis 6.0 or later
// (SET ... KEEPTTL). This layout replaced a hash before any release;
// clients of the two layouts cannot share a mutex (WRONGTYPE errors).
//
// # Errors
//
// Every error names the operation and the mutex and matches, with
// errors.Is, a sentinel of package dsync or the context's error. Bad
// arguments are reported before any I/O. Operations whose reply is lost are
// retried with the same operation id, so a retried acquisition does not
// count twice and a retried release does not release twice; an
// acquisition that is given up is undone.
package mutex
