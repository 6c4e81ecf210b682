package conformance

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

// RunBackend runs the backend contract alone: the rules of package
// backend that an adapter keeps, one case each, without the primitives'
// behaviour that Run checks besides. An adapter's author runs it first,
// and Run once it passes: a failure here is the adapter's, while one in
// Run's other cases may be the adapter's or dsync's.
//
//	func TestBackend(t *testing.T) {
//		srv := harness.Standalone(t)
//		conformance.RunBackend(t, newBackend(srv), conformance.WithHooks(srv.Hooks()), ...)
//	}
//
// It takes Run's options and hooks, and its cases are named as in Run
// ("Backend/SubscribeThenPublish"), plus two that check, through a mutex,
// the rules only the primitives exercise. A failing case logs its rule,
// numbered as in package backend's doc. What a failure usually means:
//
//	ReplyNormalization, ScriptErrorReply     replies not put into the shapes of rule 2:
//	                                         use backend.NormalizeReply
//	NoScriptFallback, ScriptFlush            EVALSHA without the EVAL fallback on NOSCRIPT (rule 1)
//	SubscribeThenPublish                     Subscribe returns before the server's confirmation (rule 3)
//	SharedChannel, Unsubscribe,              a server subscription or connection per Subscribe, or
//	ManySubscriptions,                       none left after the last Close (rule 4): use backend.Mux
//	IdlePubSubStaysOneConnection
//	SlowReceiver                             a receiver delivered to without a Mailbox (rule 6)
//	KillPubSub, Restart                      no redial or no gap after a broken connection (rule 5);
//	                                         calls that keep failing on dead pooled connections (rule 10)
//	ContextCancelled, DeadlineOnlyContext    a call that outlives its ctx (rule 7): see "Rule 7,
//	                                         by what the client does with a context" in package backend
//	Close, CloseKeepsCallersClient,          Close not idempotent, closing the caller's client, or a
//	CloseLeavesNothing                       goroutine or connection left behind (rule 8)
//	HandOffWithin50ms                        a release's wake-up late: on a cluster, channels not
//	                                         subscribed on their slot's master (rule 4)
//	RenewalsAcrossSlots                      on a cluster, Sharded not reported (rule 11): batched
//	                                         renewals fail with CROSSSLOT and holds are lost
//
// A timing bound missed on a loaded machine ("nothing within", "returned
// after") is widened by WithTimeScale; a rule broken fails at any scale.
func RunBackend(t *testing.T, newBackend NewBackend, opts ...Option) {
	s, leakOpts := newSuite(t, newBackend, opts)
	s.groups(t, []caseGroup{{"Backend", append(s.backendRules(), s.adapterRules()...)}})
	if !t.Failed() {
		goleak.VerifyNone(t, leakOpts...)
	}
}

// adapterRules are the cases of RunBackend that check adapter rules
// through a mutex, which Run checks among the mutex's cases
// (Mutex/HandOff, Mutex/ManyHoldsAcrossSlots).
func (s *suite) adapterRules() []rule {
	return []rule{
		{"HandOffWithin50ms", "rule 4: a release wakes a waiter of another backend through pub/sub within 50ms (on a cluster: each channel subscribed on its slot's master)", true,
			func(t *testing.T, ctx context.Context) { s.testHandOff(t, ctx, mutexKind) }},
		{"RenewalsAcrossSlots", "rule 11: a backend over a cluster reports Sharded, so that 200 holds over every slot range survive three renewal intervals", true,
			func(t *testing.T, ctx context.Context) { s.testManyHoldsAcrossSlots(t, ctx, mutexKind) }},
	}
}
