// Package rwlock provides a reentrant reader/writer mutual exclusion lock,
// shared through a Redis-compatible server: many readers or one writer.
//
//	cfg := rwlock.New(b, "config")
//	cfg.RLock()         // many readers at once
//	defer cfg.RUnlock()
//
// An *RWMutex has the method set of sync.RWMutex, with the context forms
// of package mutex on both sides: LockContext, TryLockContext and
// UnlockContext for writing, RLockContext, TryRLockContext and
// RUnlockContext for reading. It is a sync.Locker and a dsync.Locker for
// writing; RLocker returns the read side as a sync.Locker. Owners
// (dsync.WithOwner), leases (WithWatchdog, WithLease), the lost signal and
// fencing tokens work as in package mutex.
//
// # Holds
//
// Both sides are reentrant per owner and counted: an owner that holds a
// read hold re-enters it at once, even while writers wait, and so does an
// owner that holds the write lock. An owner that holds the write lock may
// also take a read hold (a downgrade) and keeps reading after it releases
// the write hold. An owner that holds only a read hold and asks for the
// write lock gets dsync.ErrUpgrade at once: two readers both waiting to
// upgrade would wait for each other forever. The process refuses it
// without I/O when it knows of the read hold; otherwise the server does,
// after the plain SET NX of the acquisition's first attempt failed on it
// (see Keys): one more round trip. Without an owner in the
// context every acquisition is a fresh ownerless hold, as with
// sync.RWMutex, whose RLock then Lock in one goroutine waits forever.
//
// Every owner's read hold has its own lease, renewed by the watchdog in the
// same batches as every other hold of the process: a reader whose process
// dies frees its hold when its lease ends, while the other readers keep
// theirs. Done reports the end of the write hold, RDone that of the read
// hold. Unlock and RUnlock release one side only: RUnlockContext of an
// owner with only a write hold, and UnlockContext of one with only a read
// hold, return an error matching dsync.ErrNotHeld.
//
// # Who goes first
//
// By default the lock prefers writers, as sync.RWMutex does: once a writer
// waits, new readers wait too, so a steady stream of overlapping readers
// cannot starve it; the writer gets the lock when the read holds taken
// before it ended. Writers are served in the order they reached the server:
// a waiter's place is that of its registration, which the acquire script
// makes after a first attempt's plain SET NX (see Keys) found the lock in
// use; another acquisition whose script reaches the server between the two
// queues ahead of it. A release of the write lock hands it to every reader
// waiting at that moment, at once, in the same script, and only when no
// reader waits to the next writer: readers that waited out a write go
// before the next write, so neither side starves. A write hold that runs
// out instead (its process died, or a fixed lease ended) passes the lock on
// the same way, in the first script that finds it ended: an attempt of a
// waiter or of a newcomer, which then takes its own turn. The last read
// release hands the lock to the writer at the head of the queue. Each
// hand-off wakes exactly the waiters it served. One case waits for a heartbeat
// instead: a reader whose own owner's queued writer is handed the lock
// enters under that write hold at its next attempt, a third of the waiter
// timeout later at most, since finding it would cost a look at every
// waiting reader.
//
// WithReaderPreference lets new readers in whenever no write hold is held,
// queued writers or not: more read throughput, at the price of writers that
// may wait as long as readers keep overlapping.
//
// A waiting writer's place in the queue, which keeps new readers out,
// lasts the waiter timeout (WithWaiterTimeout, 5s by default) past its last
// heartbeat, and it beats every third of that: a writer whose process died
// while waiting blocks readers for at most the waiter timeout. A waiter
// whose context ends leaves at once, and passes the lock on if it was just
// handed it. A hold handed to a waiter starts on a lease of at most 2s and
// the waiter timeout, which its watchdog extends at its first renewal, as
// in package fairlock.
//
// # Fencing tokens
//
// Every write hold takes the next token of one sequence per name, above
// that of every hold before it, read or write: pass it (Token) with every
// write to the protected resource, which rejects a write whose token is
// below the highest it has seen, as package mutex describes. Read holds
// fence nothing, since readers share the lock.
//
// Tokens are drawn and kept as package mutex draws and keeps them: a lone
// writer takes the lock with one plain SET and its token is drawn by the
// first Token, and the fence key keeps the last token drawn for an hour.
//
// # Keys
//
// The lock "config" under the default prefix uses
//
//	dsync:rwlock:{config}           string: the state (below)
//	dsync:rwlock:{config}:readers   hash: read holds by owner
//	dsync:rwlock:{config}:rexpiry   sorted set: read holds by expiry
//	dsync:rwlock:{config}:wqueue    sorted set: writers waiting, by arrival
//	dsync:rwlock:{config}:wexpiry   sorted set: writers waiting, by expiry
//	dsync:rwlock:{config}:rwait     sorted set: readers waiting, by expiry
//	dsync:rwlock:{config}:fence     the last token drawn, for an hour
//	dsync:rwlock:{config}:wake/<id> pub/sub channel of one process
//
// all in one Redis Cluster slot. The main key holds a lone holder's hold,
// write or read, expiring with its lease; with other holders or waiters
// it holds the write hold, or says that the others are in the other keys.
// Every other key vanishes with its last entry, or expires with its
// longest lease.
//
// The main key exists whenever anything else is on the lock: a read hold,
// a waiting writer or a waiting reader. So a missing main key means a
// lock nothing is on, and an uncontended Lock or RLock is one plain SET
// NX PX of it, as the mutex's, through a backend with backend.Setter
// (elsewhere a script that runs that SET), and its unlock a script that
// GETs and DELs it: four server commands in two round trips. A handle
// whose last acquisition met the lock in use tries the script first. A
// write hold that a waiter queues behind, or that its owner's read hold
// joins (a downgrade), records its end in its value, and its key lives on
// past that end for as long as they need it (and 2ms more): once that end
// has passed the write hold is gone (its holder's renewal and release
// find it so, and State reports no writer), but the key still keeps plain
// acquisitions out. Each registration and heartbeat of a waiter, and each
// renewal of a read hold, makes the main key outlive it (by 2ms, as a
// server may count the key's expiry from the start of the script that
// sets it, and the hold's from the time the script reads). When the last
// of them leaves or ends, the key goes with the hold, or with them:
// freed, it is gone.
//
// If the main key alone is deleted or evicted behind dsync's back (the
// volatile-* eviction policies may take it and leave the read holds'
// keys), newcomers may take the lock ahead of the waiting writers, one
// after another, until a waiter's next heartbeat (within a third of the
// waiter timeout) writes the key back, as a newcomer may take a mutex
// whose key vanished. The read holds left are lost with it, since the
// main key is what kept writers out of them: a plain writer, or a plain
// reader, may take the lock beside them, and come and go unseen. Each of
// those readers is told at its next renewal (RDone closes), whether a
// writer came or not, as a mutex holder is told that its key went, or at
// its release, which fails with ErrNotHeld once the key was found gone or
// a writer's hold beside it. The first acquisition, release or State, of
// any holder, that finds such a writer's hold drops them all, so that
// writers queued behind it are not held up by them.
//
// Versions of dsync whose acquisitions checked the other keys (before
// 2026-11-30) must not share a read-write lock with this one: their write
// hold's key expires with its lease though waiters are queued, and this
// version's plain SET NX would then take the lock ahead of them. Stop
// them all before starting this version.
//
// # Errors
//
// As in package mutex: every error names the operation and the lock and
// matches a sentinel of package dsync or the context's error; bad
// arguments are reported before any I/O.
package rwlock
