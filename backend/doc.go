// Package backend defines what dsync needs from a Redis-compatible server:
// atomic Lua script evaluation and pub/sub. Adapters implement Backend for a
// particular client library; they translate and hold no lock logic. The
// primitives (mutex and the rest) are the portable layer that does the work,
// in the way database/sql does the work over database/sql/driver.
//
// The module ships one adapter, backend/redigo; backend/goredis, in a
// module of its own, adapts go-redis. The conformance package checks every
// rule below, and every primitive, against any adapter.
//
// # Writing an adapter
//
// An adapter is correct when conformance.Run passes against it on a real
// redis-server. The rules it checks:
//
//  1. Eval runs the script atomically with EVALSHA and falls back to EVAL on
//     a NOSCRIPT error, so that SCRIPT FLUSH, a restart or a failover is
//     invisible to callers. Use Script.Hash; do not hash per call.
//  2. Replies are normalized: a nil reply is nil, an integer is int64, a bulk
//     or status string is string, an array is []any with every element
//     normalized the same way, and an error reply is a *ServerError (as the
//     returned error, or as an element inside an array).
//  3. Subscribe returns only after the server confirmed the subscription: a
//     PUBLISH issued right after it returns reaches the new subscription.
//  4. Subscriptions share connections: many subscriptions, on the same or on
//     different channels, use a bounded number of server connections (the
//     target is one dedicated pub/sub connection per backend). Each channel
//     is subscribed on the server once, reference-counted, and unsubscribed
//     when its last Subscription is closed.
//  5. When the pub/sub connection is lost and re-established, every live
//     subscription receives a Message with Gap set, after its channel is
//     subscribed again, because messages may have been missed meanwhile.
//  6. A slow receiver never stalls the reader or other subscriptions: deliver
//     into a Mailbox, which drops and reports a gap instead of blocking.
//  7. The context bounds every call. When it is done, the call returns an
//     error matching ctx.Err() (errors.Is), and the connection it used is
//     not returned to a pool in an unknown state. A context that can never
//     be done (Done returns nil) may still report a deadline, which the
//     call must not outlast: dsync bounds releases so, sparing adapters
//     the cost of a cancellable call. Without either, bound the call by a
//     timeout of the adapter's own.
//  8. Close is idempotent, releases only what the adapter created (never the
//     caller's pool or client), leaves no goroutine behind, and every later
//     call returns an error matching ErrClosed.
//  9. Backend values are comparable (use a pointer type): dsync keeps one
//     lease scheduler and one pub/sub hub per backend value.
//  10. Errors carry what happened: wrap transport errors with %w so that
//     net errors and context errors stay matchable.
//  11. A backend over Redis Cluster implements Sharded and reports true.
//     Primitives pass every key a script touches in keys, and the keys of
//     one script call share one hash slot. The one exception is batched
//     lease renewal, which gathers many locks into one call: on a backend
//     that does not report Sharded, a batch names keys of many slots, the
//     cluster refuses it (CROSSSLOT), and every hold in it is lost, logged
//     at Error. The suite checks this by holding 200 locks over every
//     slot range for three renewal intervals.
//
// Optional: a sharded backend that implements Batcher has its renewals
// sent as one pipeline per node rather than one call per slot; without it,
// 10,000 holds on a cluster cost thousands of calls per renewal interval.
//
// Package conformance/harness starts the servers an adapter's tests need
// (a standalone server, a cluster, a Sentinel set) with every fault hook,
// so that an adapter's test file is a few dozen lines.
package backend
