// Package election provides leader election shared through a
// Redis-compatible server, after etcd's concurrency.Election: candidates
// campaign, one leads at a time, in the order they reached the server,
// and anyone can ask who leads or be told of every change.
//
//	e := election.New(b, "reports")
//	term, err := e.Campaign(ctx, "host-a:8080") // blocks until leading
//	if err != nil {
//		return err
//	}
//	defer term.Resign(context.Background())
//	tok, err := term.Token(ctx) // pass with every write
//	if err != nil {
//		return err
//	}
//	for {
//		select {
//		case <-term.Done():
//			return errors.New("leadership lost") // stop acting as leader
//		case job := <-jobs:
//			run(job, tok) // fenced writes
//		}
//	}
//
// Run is the loop around that, for a process that should lead whenever it
// can, after Kubernetes' leaderelection.RunOrDie: it campaigns, calls a
// function with a context that is cancelled when the term ends, resigns
// when the function returns, and campaigns again, until its ctx ends:
//
//	err := e.Run(ctx, "host-a:8080", func(ctx context.Context, t *election.Term) error {
//		tok, err := t.Token(ctx)
//		if err != nil {
//			return err
//		}
//		return lead(ctx, tok) // until ctx ends: the term is over
//	})
//
// CampaignScope is one turn of it: a term as a context (see Holds as
// contexts in package dsync).
//
// # Terms
//
// A term is a fair lock's hold (package fairlock) with a value: Campaign
// queues the candidate on the server and returns a *Term once it leads;
// Resign hands the term to the next candidate in the same server call,
// which wakes it by pub/sub at once; with nobody queued, the election
// lapses. Every Campaign is a candidate of its own (the owner in its
// context plays no part); a term is never re-entered.
//
// A term has a lease, as a lock's hold has: 30s renewed every 10s by the
// watchdog by default (WithWatchdog), or fixed (WithLease). A leader whose
// process dies ends its term when the lease runs out, and the next
// candidate leads then. Done closes when the term ends: when Resign is
// called (before it reaches the server), when the term is lost (renewals
// found it gone or failed until the lease ran out; ForceResign), or a
// margin before a fixed lease runs out on the server (WithExpiryMargin).
// A leader must stop acting as leader when Done closes.
//
// # Fencing tokens
//
// A lease is not a guarantee: a leader paused (GC, swap, a partition)
// past its lease still believes it leads while the next one does.
// Every term has a fencing token (Term.Token) strictly greater than every
// earlier term's, whoever led it, kept by the leader state (see Keys) for
// the fence ttl, and across deleted keys by the server clock, as for the
// locks (see package mutex): a Resign with nobody queued deletes the
// term's key and leaves the last token in the leader state alone, so that
// if the leader state too is deleted (or evicted) behind dsync's back, the
// next term's token is seeded from the server's clock in microseconds,
// which is above every earlier token unless the clock stepped back by more
// than the time since. A term that Campaign took in one plain command (see
// Keys) has its token drawn by the first call that needs it: Term.Token
// then costs one round trip, or nothing if a read (an observer's, Leader,
// State) drew it first; a term that ends before anything drew its token
// never has one. Read the token while the term is on, pass it with every
// write only the leader may make, and have the resource reject a write
// whose token is lower than the highest it has seen.
//
// # Candidates
//
// A candidate joins the queue when its attempt reaches the server and
// finds a term on, or candidates ahead of it; nobody leads out of turn,
// also once the term the candidates queued behind ran out with nobody to
// hand it on (see Keys). Its place lasts the waiter
// timeout (WithWaiterTimeout, 5s by default) past its last heartbeat, and
// it beats every third of that: a live candidate keeps its place however
// long it waits, and one whose process died is skipped once its place
// expires. A term handed to a candidate starts on a lease of at most 2s
// (never more than the waiter timeout), which its watchdog extends at its
// first renewal: a candidate that died since its last heartbeat holds the
// election up for at most that. A Campaign whose context ends leaves the
// queue at once, and passes on a term it was just handed.
//
// # Observing
//
// Leader reads the current leader (dsync.ErrNoLeader when none), State the
// queue as well. Observe pushes every change to a channel: a new leader, a new
// value (Term.Proclaim), and the zero Leader when the election lapses. Each
// change is published by the script that makes it, but for a term taken by a
// plain campaign (see Keys), which publishes a hint in the round trip of its
// SET: observers read the state on it, and that read records the term (its
// token, start and value) for every read after it. A term that ends before the
// observers' read reaches the server is not seen at all. Observers order
// changes by a number the server keeps with them, so that none receives a state
// older than one it received, whatever the order in which messages and reads
// arrive. When that number is lost with the election's keys it is seeded from
// the server's clock, as tokens are; after a broken pub/sub connection (as a
// restart or a failover breaks it) observers take the state they read then
// whatever its number, so a server whose clock is behind does not leave them
// stuck. An observer that falls behind finds the latest state on its channel,
// having skipped those it did not receive in time. All the observers of one
// election through one backend value share a single subscription. A term that
// runs out with nobody to announce its end (its leader's process died, and no
// candidate is queued to take over) is seen by a read when its lease ends on
// the server; one whose keys are deleted is announced by its leader when its
// renewal finds it gone (within a third of the lease).
//
// # Keys
//
// The election "reports" under the default prefix uses
//
//	dsync:election:{reports}           string: the term, a fair lock's hold
//	                                   (see package fairlock); there while
//	                                   a live candidate is queued, else
//	                                   gone when no term is on
//	dsync:election:{reports}:queue     sorted set: candidates by arrival
//	dsync:election:{reports}:expiry    sorted set: candidates by expiry
//	dsync:election:{reports}:values    hash: the queued candidates' values
//	dsync:election:{reports}:leader    string, the leader state: the number
//	                                   of the last change, and the last
//	                                   term's hold id, token, start and
//	                                   value, for the fence ttl
//	dsync:election:{reports}:wake/<id> pub/sub channel of one process
//	dsync:election:{reports}:observe   pub/sub channel of the changes
//
// all in one Redis Cluster slot. The queue keys vanish with their last
// candidate; the leader state a fence ttl (WithFenceTTL, an hour by
// default) after the last change.
//
// The term's key exists whenever a live candidate is queued, as the fair lock's
// does (see package fairlock, Keys): a term that a candidate queues behind
// records its end, and its key lives on past that end for as long as the last
// candidate's place lasts; a term past its end is over (its leader's renewal
// and Resign find it so, reads report no leader), but its key keeps newcomers
// out of turn. So a missing key means that no term is on and nobody is queued,
// and an uncontended Campaign takes the term with one plain SET NX of the
// term's plain form (its holder, its lease and the candidate's value) and
// publishes the hint "term" on the observe channel in the same round trip,
// through a backend that implements backend.SetPublisher (elsewhere the acquire
// script does the same, as one script call). Such a term has no token and no
// leader state yet: the first script that finds it (a read, Term.Token, a
// renewal, a candidate that queues behind it, Proclaim) draws its token and
// records it in the leader state, its start taken from its expiry. Resign of a
// term that nothing read is a script that reads the term's key and deletes it,
// announcing nothing, since no observer knew of the term; of any other term it
// reads the term and the leader state, deletes the term's key, and writes and
// publishes the lapse. An uncontended pair that nobody observes is thus two
// round trips and 5 server commands: SET, PUBLISH, and the release script's
// call with its GET and DEL. If the term's key is deleted or evicted behind
// dsync's back while candidates are queued, newcomers may lead ahead of them,
// one after another, until a candidate's next heartbeat (within a third of the
// waiter timeout) writes the key back; the ends of their terms do not wake the
// candidates.
//
// Versions of dsync whose leader state was a hash must not share an
// election with this one: stop them all before starting this version. A
// hash left behind is read (its number and token carry on) and replaced by
// this version's next write, after which the earlier version's scripts
// fail with ErrUnexpectedReply where they read it. Nor must versions
// before the plain campaign: they take its term for a key dsync did not
// write (their Campaign and reads fail with ErrUnexpectedReply while it
// is unread), and their observers miss a term that a renewal or Token
// converts without a word.
//
// Since a read may convert a term, Leader, State, the observers' reads
// and the dsync command's inspect and list write to the server: through a
// user that may not write, or on a replica, they fail while an unread term
// is on, at once, with the server's refusal (an error wrapping its
// *backend.ServerError, READONLY on a replica). An observer's read retries
// then, and shows the term once something that may write has read it (its
// leader's Token, its first renewal under the watchdog, or a read on the
// primary through a user that may write). A user limited to +@read may
// not run the reads' scripts at all, term or not.
//
// A Campaign that finds a term on publishes the hint all the same (it is
// sent with the SET that failed), so every observer reads once more for
// each candidate that joins the queue. An election needs its user to
// publish on its channels, the observe channel and the wake channels, as
// its scripts announce every change there. Through a user whose ACL
// denies them, a Campaign or TryCampaign whose attempt is the plain SET
// with its hint (through a backend.SetPublisher) fails at once with the
// server's refusal, whether or not a term is on, and deletes the term if
// its SET took one; one whose attempt is the acquire script (another
// backend, or a handle that found the election taken, until one of its
// scripts finds it free) fails where its script publishes, which may be
// after it queued, and a term handed to it cannot announce its end. Give
// the election's user its channels.
//
// # Errors
//
// Every error names the operation and the election and matches a sentinel
// of package dsync or the context's error: ErrNotHeld for a term that is
// over, ErrNoLeader for Leader without one, ErrUnexpectedReply for a key
// that holds something dsync did not write (which is left alone; a
// plain campaign does not read the leader state, so a foreign one there
// fails the term's reads and its Token instead of its Campaign),
// ErrClosed for a closed backend; or else, for the server's refusal of a
// command (an ACL's, a replica's, see Keys), it wraps the
// *backend.ServerError. Bad arguments are reported before any I/O.
// Campaign and Run return ErrUnexpectedReply, ErrClosed, bad arguments and
// the refusals that cannot pass at once (retrying cannot mend them), and
// ride out the errors that may pass.
package election
