// Package dsync holds the vocabulary shared by dsync's distributed
// synchronization primitives: the owner carried by a context, the sentinel
// errors every package returns, and the Locker interface that multilock
// composes.
//
// The primitives live in subpackages: mutex (reentrant mutex), fairlock,
// rwlock, semaphore, multilock and election (leader election). They all
// run over a backend.Backend, a small interface that any Redis client can
// implement; backend/redigo is the adapter shipped with the module,
// backend/goredis and backend/rueidis (modules of their own) those for
// go-redis and rueidis. integrations/gocron, a module of its own too, runs
// gocron v2 jobs across processes on the mutex or the election.
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
// # Handles
//
// A handle (mutex.New, election.New, ...) is a name on a backend value. It
// does no I/O and costs a few allocations: make one per name, and keep
// it for as long as the name is in use, as a field of the service, or in
// a map for names made per key (a lock per order). Holds do not live in
// the handle but in the backend value's session, so every handle on the
// same backend value and name finds an owner's hold (Token, Done,
// UnlockContext), and a handle made per call works; except for ownerless
// holds (below), which only the handle that took them releases. Make one
// backend value per client and keep it for the process's life: its
// session renews every hold in batches and shares pub/sub connections.
//
// # Leases
//
// A lease is how long a hold outlives a holder that died without
// releasing it: the longest the others may wait for a crashed process.
//
//   - The watchdog (the default; WithWatchdog(d), 30s unless set) renews
//     the lease every d/3 for as long as the hold lasts, so a job may run
//     for hours on a 2s lease. Choose d for the gap you can afford after a
//     crash, not for the job's length: a job that runs every 100ms wants
//     a second or two; a nightly report does with the default. A shorter
//     d costs renewals (batched: one script call per d/3 per backend,
//     however many holds) and leaves less room for a stalled process or
//     server: under a few hundred milliseconds, a GC pause or a slow
//     server loses holds.
//   - A fixed lease (WithLease(d)) is never renewed: the hold ends d after
//     it was taken, done or not. It suits work bounded well within d, or a
//     lease meant as a deadline.
//
// However long the lease, a holder stalled past it (GC, swap, a
// partition) may act while another holds the lock: take the hold as a
// scope (below) so that the work stops when it is lost, and pass the
// fencing token with every write.
//
// # Ownerless holds
//
// Without an owner in ctx, an acquisition takes an ownerless hold, which
// the handle remembers, oldest first: Unlock, or UnlockContext with any
// ctx that carries no owner (another goroutine's, a framework's), releases
// the oldest ownerless hold taken through that handle, as sync.Mutex's
// Unlock may be called from any goroutine. So an API that hands the
// release a different context than the acquisition (gocron's
// Lock.Unlock(ctx)) works with ownerless holds on a handle it keeps. When
// several ownerless holds of one handle may be on at once and a release
// must be exactly its own, keep the hold's owner instead: a scope's
// release function, or a ctx from WithOwner kept for the release
// (context.WithoutCancel(ctx) keeps the owner without the cancellation).
//
// # Holds as contexts
//
// Go code stops work by cancelling a context, so every primitive can
// return its hold as one: mutex, fairlock and rwlock's LockScope, rwlock's
// RLockScope, semaphore's AcquireScope, multilock's LockScope and
// election's CampaignScope acquire as LockContext (Acquire, Campaign)
// does and return
//
//	ctx, unlock, err := m.LockScope(ctx)
//	if err != nil {
//		return err
//	}
//	defer unlock()
//	return work(ctx) // its ctx is cancelled if the hold is lost
//
// The names keep the call's verb (Lock, RLock, Acquire, Campaign) and say
// what comes back: a scope, a context bounded by the hold, in the manner
// of context.WithCancel. The returned context is derived from ctx and ends
// when the hold ends: lost, with a context.Cause that matches ErrNotHeld
// and says how ("hold no longer on the server", "taken by ForceUnlock",
// "renewals failed until the lease ran out", "lease expired"); released,
// with context.Canceled; or when ctx itself ends, which releases nothing.
// It carries the hold's owner (ctx's, or a fresh one), so that Token with
// it finds the hold and acquisitions with it re-enter; a scope taken with
// another scope's context ends with it (use context.WithoutCancel to
// outlive it, as for a downgrade from a write scope to a read scope).
//
// The release function takes no context and returns the release's error:
// it cancels the scope's context first, so that the work stops before
// another owner can take the hold, then releases exactly this hold,
// detached from any cancellation and bounded by the release's own few
// seconds. Calls after the first do nothing and return the first's
// result. A scope costs no goroutine (a multilock's keeps one while it is
// on, to watch its members): the hold's lease cancels the context in the
// step that closes Done. election.Run is the loop built on a term's scope:
// campaign, lead with the term's context, resign, campaign again.
//
// # Errors that last
//
// Every call reports an error that retrying cannot mend at once, and
// rides out (acquisitions) or returns (the rest) those that may pass: a
// connection failure, a restarting or failing-over server. The lasting
// ones, by sentinel, matched with errors.Is:
//
//   - Every call: ErrInvalidBackend, ErrInvalidName, ErrInvalidLease,
//     ErrInvalidPermits (semaphore), ErrInvalidMembers (multilock), before
//     any I/O, for a handle made with bad arguments; ErrClosed once the
//     backend is closed; ErrUnexpectedReply for a key that dsync did not
//     write (left untouched) or an adapter that breaks the reply contract.
//   - LockContext, RLockContext, Acquire, Campaign and their scopes wait
//     through passing errors until ctx ends, then return an error matching
//     ctx.Err() (context.DeadlineExceeded, context.Canceled) that names the
//     last backend error. Besides the above: ErrUpgrade (rwlock: a read
//     holder asking for the write lock); semaphore.ErrCapacityMismatch
//     and ErrInvalidPermits (n above the capacity set on the server).
//     Lock, RLock and the other forms without a ctx panic on these.
//   - TryLockContext, TryAcquire and TryCampaign make one attempt: they
//     return a passing error too, which a retry may mend.
//   - UnlockContext, RUnlockContext, Release and Resign: ErrNotHeld when
//     there is nothing to release (never held, released already, held by
//     another owner or through another backend value, lost; semaphore:
//     fewer than n permits held). An error
//     matching ctx.Err() means the outcome was not known by the deadline:
//     the release goes on by itself; do not repeat it.
//   - Token, Proclaim: ErrNotHeld for a hold or term that is over;
//     Leader: ErrNoLeader.
//
// # Contexts and deadlines
//
// Every call that takes a context keeps its deadline. An acquisition
// (LockContext, RLockContext, Acquire, ...) waits until ctx ends and
// returns at most half a second after its deadline, even on a stalled
// server, with an error matching ctx.Err(); a cancellation ends the wait
// at once, and an attempt already sent when the server answers it. With a
// context that can be cancelled but has no deadline (a request's), an
// attempt is bounded by the same grace, 350ms, so that a cancellation too
// returns within half a second without a goroutine per call to watch it:
// a server that does not answer by then fails the attempt with an error
// that may pass, and the operation tries again, its attempts from then on
// waiting for the reply as long as ctx is alive (watched by a goroutine
// per call), so that a server slower than the grace is waited for. A
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
