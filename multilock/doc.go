// Package multilock composes locks: All holds every one of its members or
// none, and RedLock holds a majority of members on independent servers,
// the RedLock algorithm. Members are any dsync.Locker (a mutex, a fairlock,
// an rwlock's write side, any of them through another adapter), on one
// backend or several; a multi-lock is itself a dsync.Locker and a
// sync.Locker.
//
//	l := multilock.All(mutex.New(b, "account:1"), mutex.New(b, "account:2"))
//	if err := l.LockContext(ctx); err != nil { ... }
//	defer l.UnlockContext(ctx)
//
// # Owners
//
// A multi-lock acquires its members for ctx's owner (dsync.WithOwner), as
// every dsync lock does, and re-enters when the owner holds it already.
// With no owner in ctx it takes an ownerless hold for a fresh owner, which
// it remembers, oldest first, for Unlock; Lock and Unlock are the
// sync.Locker form of that.
//
// # Acquiring
//
// Members are tried in parallel, each with one attempt (TryLockContext):
// with nothing contended, locking N members costs one round trip, as does
// unlocking them. TryLockContext is that one round; when it does not win
// (All: a member is held by another owner; RedLock: no majority), whatever
// it got is released at once.
//
// LockContext then waits, and how differs:
//
//   - All uses ordered locking. Members have a canonical order, by type
//     and name (Name method), the same in every group and process. The
//     group holds a prefix of its members in that order and waits, with
//     the member's LockContext (woken by its pub/sub wake-ups, not by
//     polling), for the first member it lacks; holding it, it tries all
//     the others in parallel, keeps the longest prefix it now holds,
//     releases the rest, and repeats. A group waits only for a member that
//     comes after every member it holds, so two groups over overlapping
//     members, given in any order, cannot deadlock; and the waiters of a
//     member get it in turn, so neither livelocks. A wait while holding
//     members is bounded (2s, with jitter); past it the group releases
//     everything, backs off and starts over. That bound matters only for
//     members the order cannot tell apart (the same type and name on two
//     backends, or members without a name, ordered by position): for them
//     it turns a possible deadlock into a delay. Release-and-retry with
//     backoff alone was rejected: under contention it keeps releasing
//     what it got and loses its place in every queue; and acquiring every
//     member in turn would cost N round trips even without contention.
//   - RedLock queues: a round of
//     LockContext that finds a member busy does not win with a majority of
//     the others (a newcomer would otherwise take the free majority from
//     under the waiter just handed the busy member, and waits would grow
//     without bound), unless its last wait for a busy member timed out
//     (that member may be stuck held), or the majority it won is one its
//     owner held already (a re-entry takes nothing from a waiter; a
//     member says whether the owner holds it through its Done, so this
//     holds for any multi-lock over handles on the same backends). After
//     a failed round it waits, holding nothing,
//     for the first busy member (in the same order, bounded by 1s, since
//     that member's server may be the one that is gone) and tries the
//     others in parallel while holding it. Where that falls short of a
//     majority, most often because the last holder, locking again, took
//     some of them in a round it gives back at once (it found the member
//     held), it keeps what it holds and waits, in turn, for each busy
//     member that comes after the first in the order, trying the rest
//     again after each, as All does. Before each wait it lets go of the
//     members it holds that come after the one it waits for (its tries
//     take them in any order): a group waits only for a member after all
//     it holds, so no two rounds wait for each other but over members the
//     order cannot tell apart, where the wait's bound turns a deadlock
//     into a delay. These waits are short: 8 times the round trip of the
//     tries before them, at least 100ms (at most 1s), since a newcomer's
//     round gives its members back as soon as its tries reply, while a
//     member stuck held would cost each contender in turn the whole wait,
//     holding the gate. A wait that times out goes on with the next, and
//     the next round may win without that member. Only when none is left,
//     a wait fails or the validity runs out does it release everything
//     and start over after a short random pause. Keeping the member it
//     waited for shortens the contended tail: a newcomer cannot slip in
//     while it lets go. Members that could not be reached count as
//     failed; a round with nothing to wait for backs off exponentially,
//     from 10ms up to 500ms, with jitter.
//   - Once a RedLock's round has found a member busy, its next
//     acquisition by an owner that holds none of the members queues for
//     the first member in order (the gate every waiter queues for) before
//     it tries the others, instead of trying all of them at once: the
//     last holder, locking again, would otherwise take the free members
//     from under the waiter its release just handed the gate, and give
//     them back only when it found the gate busy, which costs every
//     hand-off round trips more (with 8 contenders and a 1 ms hold, about
//     a quarter of the rate; see bench/README.md). An acquisition that
//     then finds nothing in the way goes back to trying all at once. The
//     gate's attempt counts as the first round's for that member: a
//     server that stalls costs one member timeout, not two. While the
//     gate's server answered the last attempt on it, the acquisition
//     queues for the gate at once, in one call, instead of trying it
//     first and then queueing (a call more per hand-off, about a tenth
//     of the rate). A server that refuses the wait's first attempt ends
//     the wait at once, and the first round counts the gate down; one
//     that stalls, or goes away while the acquisition waits (its waiters
//     are woken only once their pub/sub connection is back), costs that
//     acquisition the wait's bound (1s) once, and the first round, not
//     trying the gate again, counts it down. Either way the next one
//     tries the gate first again.
//
// On failure (ctx done, a member's error) nothing is left held: the
// members acquired are released in parallel, detached from ctx's
// cancellation (each member bounds its own release).
//
// Under contention a group behaves as its members do. With mutexes, a
// release frees a member and wakes its head waiter, and a group that asks
// again at once may take it first, until the head is due (see "Two modes
// under contention" in package mutex: past the hand-off threshold, or,
// while the member's holds are shorter than the threshold, 3 thresholds
// after its wake-up): the member is then handed to that waiter, a
// group's own LockContext included. A head waiter that locks through the
// releasing group's own backend value is handed the member at once. So a
// group that releases and locks again in a loop keeps the lock busy, and
// no group waits longer than about 4 of a member's thresholds for itself
// and for each waiter queued before it, plus their holds.
// With fairlock members, each member is handed over in turn at every
// release: strict order, at the cost of an idle wake-up between holders.
// Give the members of one group the same kind and options.
//
// # Leases and the lost signal
//
// Each member keeps its own lease: with the watchdog (the members'
// default) every member is renewed; with a fixed lease (WithLease on the
// members) each gets it. Done returns a channel closed when the group is
// lost: when a member it holds is lost (All), or when so many are lost that
// no majority is left (RedLock); and when the group is unlocked. Members
// that do not report their losses (no Done method) are taken as never lost.
// A lost group is not re-entered whole: a re-entry takes the lost member
// afresh, at a count of one while the others' counts grow, so the inner
// unlock frees that member early and the outer unlock returns ErrNotHeld
// for it. Once Done is closed, unlock the group rather than re-enter it.
//
// # RedLock
//
// RedLock(locks...) is the algorithm of the Redis documentation over N
// members, each on its own independent server (not replicas of one
// another): an acquisition succeeds when N/2+1 members were acquired and
// time is left of the lease, its validity, lease − elapsed − drift. Here
// elapsed is the time the winning round took, from its first request, and
// drift is the lease times the drift factor (WithDriftFactor, 0.01 by
// default) plus 2ms. A round that waited for one member after finding it
// busy counts from when that member was acquired; a wait for the gate in
// one call (see Acquiring) counts from that call's first request, since it
// cannot tell a wait from a late reply on a free gate. An
// acquisition that used up its validity counts as failed and releases. The
// lease is the members' (WithLease here says what it is: 30s by default,
// the members' default watchdog lease). Members that are unreachable count
// as failed: RedLock over 5 servers acquires with 2 of them down. Each
// attempt on a member is bounded by a twentieth of the lease (between 50ms
// and 1s), so that a stalled server costs a round only that.
//
// What RedLock does not guarantee, and no lease-based lock does
// (Kleppmann, "How to do distributed locking", 2016): a holder paused (GC,
// swap, a stalled VM) past its validity still believes it holds the lock
// while another holds it; a server whose clock jumps expires its key early
// or late; a server restarted without persistence (or with appendfsync
// other than always) forgets the holds it had, so a majority can be formed
// again by another owner while the first still believes it holds it, until
// its members find their keys gone (at their next renewal, or at once when
// their pub/sub connection to the restarted server comes back); the test
// TestRedLockServerRestartedWithoutPersistence shows it. Delaying a
// restarted server's return by more than the lease (the Redis
// documentation's remedy) or running it with appendfsync always narrows
// that. Use fencing tokens with any protected resource: the members'
// tokens grow even across such a restart (see package mutex), so the
// newer holder's tokens are the higher.
//
// # Fencing tokens
//
// A group has no token of its own: Tokens returns the fencing token of
// each member it holds (0 for a member it does not hold, or one without
// tokens). A resource guarded by an All lock can check the token of the
// member that guards it; one guarded by a RedLock can require, say, that
// the tokens it is shown come from a majority of the members and are each
// the highest it has seen from that member.
//
// # Errors
//
// All and RedLock with no member, a nil member or the same member twice
// return a lock whose every call reports an error matching
// dsync.ErrInvalidMembers, before any I/O.
package multilock
