// Package dsync holds the vocabulary shared by dsync's distributed
// synchronization primitives: the owner carried by a context, the sentinel
// errors every package returns, and the Locker interface that multilock
// composes.
//
// The primitives live in subpackages: mutex (reentrant mutex), fairlock,
// rwlock, semaphore, multilock and election (leader election). They all run over a backend.Backend, a
// small interface that any Redis client can implement; backend/redigo is
// the adapter shipped with the module, backend/goredis (a module of its
// own) the one for go-redis.
//
// # Owners
//
// Go has no thread identity, and dsync does not fake one. An owner is a
// logical holder (a request, a job) carried by a context:
//
//	ctx = dsync.WithOwner(ctx)
//	mu.LockContext(ctx)   // acquired by the owner
//	mu.LockContext(ctx)   // re-entered: the hold count is now 2
//
// Every acquisition made with that ctx, or a ctx derived from it, belongs to
// the owner, so nested calls re-enter. A ctx without an owner acquires as a
// fresh owner each time, which makes it non-reentrant like sync.Mutex: a
// second LockContext blocks. An owner is meant to be used by one goroutine
// at a time, like a thread; goroutines that share an owner share its holds.
//
// Owner ids are random 128-bit values, unique without coordination; they are
// what the server stores as the holder.
//
// A hold belongs to its owner and to the backend value it was taken
// through, as a Redisson lock belongs to its client and an etcd lock to its
// session: every handle on that backend value finds it (Token, Done,
// Unlock), and a handle on another backend value of the process does not.
// An unlock through that other handle returns an error matching
// ErrNotHeld that says the hold was taken through another backend value,
// and changes nothing; the hold stays releasable through its own. Each
// backend value has one session in the process, made on first use and
// retired when idle, which renews its holds in batches, shares its pub/sub
// subscriptions among its waiters and hands holds to them.
//
// # Contexts and deadlines
//
// Every call that takes a context keeps its deadline. An acquisition
// (LockContext, RLockContext, Acquire, ...) waits until ctx ends and
// returns at most half a second after its deadline, even on a stalled
// server, with an error matching ctx.Err(); a cancellation ends the wait
// at once, and an attempt already sent when the server answers it. A
// release (UnlockContext, RUnlockContext, Release) does not depend on
// ctx's cancellation: an unlock deferred with a context that has ended
// still releases, bounded by a few seconds of its own and by the hold's
// lease. But the call returns by ctx's deadline plus 100ms (100ms after
// the call if ctx had ended already): if the release's outcome is not
// known by then, the error matches ctx.Err() and the release goes on in
// the background. Its outcome reaches the hold all the same: renewals
// stop and Done closes if it failed, the hold then expiring by itself;
// the observer hooks hear of it. A release that went on in the background
// is counted once, however its retries land, and the owner may lock again
// at once: it re-enters the hold if the release has not landed yet, or
// takes a new one.
//
// # Failure modes
//
// What holds under each fault class, as the fault suite (tests/fault, run
// by CI against real servers) checks it, with figures from a 2-vCPU VM:
//
//   - Server stalled or paused (DEBUG SLEEP, SIGSTOP): a failed lock
//     returns at most half a second after its ctx's deadline (0.45s),
//     matching context.DeadlineExceeded. Past the lease the holder is told
//     (Done) within it, a waiter acquires 1–2ms after the server is back,
//     and the old holder's fenced write is refused.
//   - Partition, latency, lost replies: a partitioned holder is told
//     before the other side can acquire; an acquisition whose reply was
//     lost is undone by its clean-up; a retried release does not release
//     twice.
//   - Server restarted: with appendfsync always, holds are kept. Without
//     persistence they are lost and another owner may acquire at once; the
//     holder is told as its connection comes back (12–17ms after the
//     server answers), and only fencing tokens protect the resource. A
//     loss in the first moments of a backend's holds, before its watch
//     subscription is up (normally a millisecond), is noticed at the next
//     renewal instead.
//   - Failover (Sentinel): an acquisition not yet replicated is lost; Done
//     fires and tokens keep increasing.
//   - Pub/sub connection killed, or dropped as a slow consumer: waiters
//     still acquire, 13–21ms after the release.
//   - Client process killed or paused: a killed holder's lock is free when
//     its lease ends; a paused one is told on resume and its fenced writes
//     are refused. A dead waiter handed a mutex holds it up to 2s, and the
//     others notice within their 5s heartbeat.
//   - Key deleted behind the holder's back: Done within a third of the
//     lease (600ms lease: p50 108ms, max 200ms over 120 trials).
//   - Expiry under CPU load: Done closes a margin (1% of the lease + 2ms,
//     WithExpiryMargin) before the server's expiry; an unlock within the
//     margin still releases the hold. A holder stalled longer than the
//     margin can still act after its hold is gone: use fencing tokens.
//
// A 60s nemesis soak mixes these faults, eviction included, over client
// processes of every primitive side by side (exclusive holds doing fenced
// read-modify-writes, read holds, permits, multi-locks over two servers,
// an election's terms), and checks that no two lease-valid holds overlap
// (but read holds), that no more permits than the capacity are held, that
// no fenced update is lost, that tokens increase, that each primitive's
// history is linearizable for its model (porcupine), and that a fresh
// owner takes all of each at the end.
package dsync
