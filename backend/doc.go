// Package backend defines what dsync needs from a Redis-compatible server:
// atomic Lua script evaluation and pub/sub. Adapters implement Backend for a
// particular client library; they translate and hold no lock logic. The
// primitives (mutex and the rest) are the portable layer that does the work,
// in the way database/sql does the work over database/sql/driver.
//
// The module ships one adapter, backend/redigo; backend/goredis and
// backend/rueidis, each in a module of its own, adapt go-redis and rueidis.
// The conformance package checks every rule below, and every primitive,
// against any adapter.
//
// # Writing an adapter
//
// An adapter is correct when conformance.Run passes against it on real
// servers; conformance.RunBackend, the rules below alone, is the one to
// make pass first. examples/conformance/conformance_test.go in the dsync
// repository is a complete test file to copy. The three shipped adapters are under 300
// lines each, because the package gives them what every client needs:
//
//   - Mux is the whole pub/sub half (rules 3 to 6): the adapter writes a
//     PubSubDriver that opens a connection and sends SUBSCRIBE,
//     UNSUBSCRIBE and PING on it, and reads what arrives (EventQueue helps
//     a client that hands events to callbacks). A driver for Redis Cluster
//     also implements SlotMaster (SlotTable and Slot help a client that
//     does not expose its slot map). A driver that dials its connections
//     itself, outside the client's pool, dials them with the client's
//     settings (AUTH, SELECT, TLS): from the client where it exposes them
//     (redigo's Pool.Dial), or from an option of the adapter's New (a
//     dialer) where it does not.
//   - Pipeline is the calling half, for a client that does not pipeline
//     by itself (redigo, go-redis): the adapter gives it two functions,
//     one that sends a call alone and one that sends many at once through
//     the client's pipeline, and Pipeline makes concurrent calls share
//     round trips while keeping rules 7, 8 and 10 (its documentation says
//     how). A client that pipelines by itself (rueidis) needs none.
//   - NormalizeReply, ArgStrings and TransportError translate replies,
//     arguments and errors; PipelineBatch implements Batcher over a
//     client's pipeline; PX and SetReply help implement Setter, which a
//     Pipeline implements, as it does SetPublisher.
//   - CallContext, DeadlineContext, CallTimeout and Calls keep rule 7
//     (see below, by client), for an adapter without a Pipeline.
//
// The rules conformance.Run checks:
//
//  1. Eval runs the script atomically with EVALSHA and falls back to EVAL on
//     a NOSCRIPT error, so that SCRIPT FLUSH, a restart or a failover is
//     invisible to callers. Use Script.Hash; do not hash per call.
//  2. Replies are normalized: a nil reply is nil, an integer is int64, a bulk
//     or status string is string, an array is []any with every element
//     normalized the same way, and an error reply is a *ServerError (as the
//     returned error, or as an element inside an array). A *ServerError
//     returned by a call says that the server refused it before it ran
//     anything (OOM, BUSY, LOADING, READONLY, ...): a release so refused
//     is known not to have run. An error reply to a command an adapter
//     sends after the script (a WAIT, say) is not the script's, and is
//     reported as another error. Over RESP3, true
//     is int64(1), false is nil, a double is truncated to int64 (see
//     NormalizeReply). Script arguments are of four types only: string,
//     []byte, int and int64 (integers sent in decimal, as ArgStrings does).
//  3. Subscribe returns only after the server confirmed the subscription: a
//     PUBLISH issued right after it returns reaches the new subscription.
//  4. Subscriptions share connections: many subscriptions, on the same or on
//     different channels, use a bounded number of server connections: one
//     dedicated pub/sub connection per backend, or, on Redis Cluster, one
//     per master. Each channel is subscribed on the server once,
//     reference-counted, and unsubscribed when its last Subscription is
//     closed. On a cluster, subscribe each channel on the master serving
//     its hash slot (Mux does, given a SlotMaster): a PUBLISH reaches every
//     node, but a subscriber on another node than the publishing script's
//     hears it only through the cluster bus, about 40ms late on Redis 7 and
//     later under load, while the suite expects a hand-off within 50ms. A
//     channel shares its lock's hash tag, so its slot's master is where the
//     releasing script runs.
//  5. When the pub/sub connection is lost and re-established, every live
//     subscription receives a Message with Gap set, after its channel is
//     subscribed again, because messages may have been missed meanwhile.
//  6. A slow receiver never stalls the reader or other subscriptions: deliver
//     into a Mailbox, which drops and reports a gap instead of blocking.
//  7. The context bounds every call. When it is done, the call returns an
//     error matching ctx.Err() (errors.Is), and the connection it used is
//     not returned to a pool in an unknown state. A context that can never
//     be done (Done returns nil) may still report a deadline, which the
//     call must not outlast. Without either, bound the call by a timeout
//     of the adapter's own.
//  8. Close is idempotent, releases only what the adapter created (never the
//     caller's pool or client), leaves no goroutine behind, and every later
//     call returns an error matching ErrClosed. The suite counts as the
//     adapter's every goroutine started after the backend's first call
//     (which lets a client start its pools and refreshers) that is still
//     running after Close; a goroutine the client itself keeps, even past
//     its own Close (rueidis closes dropped cluster connections seconds
//     later), or starts later (a pool that fills in the background), is
//     dealt with in the test (see Goroutines in package conformance).
//  9. Backend values are comparable (use a pointer type): dsync keeps one
//     lease scheduler and one pub/sub hub per backend value.
//  10. Errors carry what happened: wrap transport errors with %w so that
//     net errors and context errors stay matchable. An error matches a
//     context error only when the call's context is done or past its
//     deadline: dsync retries a call that failed with a transport error or
//     a *ServerError of a passing state (LOADING, BUSY, TRYAGAIN,
//     MASTERDOWN, CLUSTERDOWN, READONLY, NOREPLICAS, OOM) until the
//     operation's context ends, and takes a context error for that end.
//     So an Eval may fail on a pooled connection that a restart or a
//     failover killed: Backend/Restart allows that (it tries a call up to
//     100 times), and wants a gap on every subscription and the calls
//     after the failures to succeed. An adapter must not re-send a call
//     on its own once it may have reached the server (go-redis's
//     MaxRetries does, unless told not to): return the error instead.
//     dsync's retry knows that the first try may have run, and a release
//     whose first try deleted the hold counts as done; a silent re-send
//     would find the hold gone and report ErrNotHeld for a release that
//     worked. Re-sending a call that surely never left (the connection
//     failed before the write) is fine.
//  11. A backend over Redis Cluster implements Sharded and reports true.
//     Primitives pass every key a script touches in keys, and the keys of
//     one script call share one hash slot. The one exception is batched
//     lease renewal, which gathers many locks into one call: on a backend
//     that does not report Sharded, a batch names keys of many slots, the
//     cluster refuses it (CROSSSLOT), and every hold in it is lost, logged
//     at Error. The suite checks this by holding 200 locks over every
//     slot range for three renewal intervals. Reporting false is the same
//     as not implementing Sharded: an adapter whose client may or may not
//     be a cluster implements it and reports which.
//
// Concurrent calls through one backend value share round trips: the
// Backend/SharedCalls cases of the suite call one backend from many
// goroutines at once, cancel some calls mid-way and kill the connections
// under others (the KillClients hook), and want every reply to reach its
// own caller, every call whose context ended back by then, and every
// failure one that dsync retries. An adapter that sends each call on a
// connection of its own passes them too, at a round trip per call.
//
// Optional: a sharded backend that implements Batcher has its renewals
// sent as one pipeline per node rather than one call per slot; without it,
// 10,000 holds on a cluster cost thousands of calls per renewal interval.
// dsync calls EvalBatch on sharded backends only. A backend that implements
// Setter lets dsync set a key that must not exist yet (a free lock's) with
// a plain SET NX PX, cheaper on the server than a script; without it,
// dsync runs a script instead. The
// Backend/SetNX cases check it where it is implemented. A Setter that
// implements SetPublisher also sends a PUBLISH in the SET's round trip
// (an election's campaign announces itself to its observers with it);
// Pipeline.SetNXPublish implements it, and the Backend/SetNXPublish cases
// check it.
//
// Rule 7, by what the client does with a context:
//
//   - It gives up a call in flight as soon as the context is done: pass
//     the context on.
//   - It gives up a call in flight only at a deadline, or not always at a
//     cancellation (go-redis, rueidis), or watches ctx.Done() but gives up
//     only when its reader reaches the call (radix v4): run calls whose
//     context can be cancelled through Calls. Backend/ContextCancelled
//     tells: without Calls it fails with "returned after ..., when its
//     reply came".
//   - The context can never be done but has a deadline (Done returns nil;
//     dsync's primitives pass such contexts on purpose, so that an
//     adapter needs no goroutine per call): the call must end by the
//     deadline all the same (Backend/DeadlineOnlyContext). Give a client
//     that sets socket deadlines from ctx.Deadline the context that
//     CallContext returns. context.WithTimeout(ctx, CallTimeout(ctx, d))
//     does not bound such a call: ctx's deadline being the earlier, Go
//     returns a child with no timer, whose Done never closes. Give a
//     client that watches Done
//     context.WithTimeout(context.WithoutCancel(ctx), CallTimeout(ctx, d)),
//     which has one.
//   - The context can never be done and has no deadline (Lock uses
//     context.Background): the adapter bounds the call by a timeout of its
//     own (see CallTimeout).
//
// A failover (Sentinel, or a cluster promoting a replica) is the client's
// to follow: calls go to the new primary once the client knows it, and
// fail meanwhile (rule 10: dsync retries them). Mux redials the lost
// pub/sub connection and sends a gap (rule 5), given a DialPubSub that asks
// the client for the primary's address at each call. The suite on a
// Sentinel set runs every case but Restart against the primary; it fails
// no primary over. Test that with harness.Sentinel.KillPrimary in a test
// of the adapter's own (backend/goredis's sentinel_test.go is one).
//
// Package conformance/harness starts the servers an adapter's tests need:
// a standalone server and a cluster with every fault hook, and a Sentinel
// set with every hook but Restart (declare it with
// conformance.WithoutHooks("Restart")), so that an adapter's test file is
// a few dozen lines. What changed in the suite, and what an adapter that
// passed before may need to do, is in CHANGES.md at the repository's root.
package backend
