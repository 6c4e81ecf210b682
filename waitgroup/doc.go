// Package waitgroup provides a wait group shared through a Redis-compatible
// server: Go's sync.WaitGroup across processes, and what Redisson calls a
// CountDownLatch, with one difference that matters on a network: units
// whose process dies are reported, not waited for.
//
//	wg := waitgroup.New(b, "deploy-42")
//	wg.Add(ctx, 1)          // in each region's worker, before it starts
//	defer wg.Done(ctx)      // when it has finished
//
//	err := waitgroup.New(b, "deploy-42").Wait(ctx) // anywhere
//	var ab *waitgroup.AbandonedError
//	if errors.As(err, &ab) { // a worker died: its units will never be done
//		log.Printf("%d units of %s abandoned", ab.Units, ab.Owner)
//	}
//
// # Owners and leases
//
// The units added through a handle belong to the handle's owner, a fresh
// id made by New (Owner returns it): Done counts down one of them, from any
// goroutine, and only through that handle, as sync.WaitGroup's Done counts
// down what Add added; a Done with none of the handle's units pending is
// an error matching dsync.ErrNotHeld. The handle's units are one hold of
// its owner on the server, kept alive by a lease: the watchdog's, renewed
// every third of it while units are pending (WithWatchdog, 30s by default;
// in the batched renewals every primitive of the backend value shares), or
// a fixed one from the last Add (WithLease). A process that dies stops
// renewing: its units are abandoned when their lease runs out.
//
// # Abandoned units
//
// Any script that finds an owner's lease ended (a waiter's attempt, an Add,
// a Done) takes its units out of the count and records the first such
// owner. Every Wait then returns an *AbandonedError naming that owner and
// its units, which matches dsync.ErrAbandoned: the waiters wake when the
// earliest lease of the units they wait for runs out, so they learn it
// within a few milliseconds of the lease's end on the server (a lease
// plus the time since the owner's last renewal, after its death). Every
// Wait that begins before the count is 0 returns it too; the group's other
// units are still counted down as usual, and once the count is 0 the next
// Add begins afresh. WithKeepAbandoned keeps Redisson's semantics instead:
// abandoned units stay pending and Wait waits for them, as long as its
// context allows.
//
// # Waiting
//
// Wait returns at once when the count is 0. Otherwise its waiter registers
// on the server and sleeps until woken through pub/sub: the Done that
// brings the count to 0 wakes every waiter, handing each the end of the
// count in the wake-up itself, so a waiter returns within a pub/sub
// message of that Done. A waiter beats every third of the waiter timeout
// (WithWaiterTimeout, 5s), and tries again when the earliest lease runs
// out; it never polls. A wake-up it missed (a broken pub/sub connection)
// is made up by its next attempt: the end of the count is recorded on the
// server for the waiters registered when it came.
//
// # Keys
//
// The group's keys share one hash tag: the count (a hash), the owners'
// leases, the waiters, and a record of the last ends of the count that
// had waiters, which outlives its last waiter's registration by the
// waiter timeout. They vanish when the count is 0 and nobody waits. A
// Wait whose group's state vanished while it waited (deleted by hand, or
// evicted under maxmemory) ends with ErrVanished rather than taking the
// missing count for 0; the owners of its units learn of the loss at their
// next renewal, and their Done then fails with dsync.ErrNotHeld. A Wait
// that begins after the state vanished finds the group empty: only the
// waiters registered when it vanished can tell. A server under maxmemory
// that refuses a write (OOM) refuses the script's first one that may take
// memory, before anything else is written: the count and its units stay
// consistent.
package waitgroup
