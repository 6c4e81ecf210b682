// Package conformance is the test suite every dsync backend adapter runs:
// the backend contract (see package backend) and the behaviour of every
// primitive, on whatever server the adapter talks to.
//
// An adapter's test calls Run with a function returning a fresh backend:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) backend.Backend {
//			b := myadapter.New(newClient())
//			t.Cleanup(func() { b.Close() })
//			return b
//		}, conformance.WithHooks(conformance.Hooks{FlushScripts: flush}))
//	}
//
// Every backend the function returns must talk to the same server: a test
// simulates separate processes with separate backends. The function is
// called from the goroutine of the test it is given, and the backend must be
// closed when that test ends (t.Cleanup).
//
// Subtest names are stable ("Backend/SubscribeThenPublish",
// "Mutex/MutualExclusion", "FairLock/Order", ...), so a run can be
// narrowed with -run. Every exclusive lock (mutex, fairlock, the write side
// of rwlock) runs the same table of cases, each naming the rule it checks,
// and then cases of its own. Tests use random key prefixes and channel
// names and run in parallel, except those that disturb the whole server
// (killing connections, restarting, pausing), which run alone. Each has
// its own deadline. Run fails if a goroutine started during the suite is
// still running at its end, and a closed backend must leave no goroutine
// and no pub/sub connection of its own behind (Backend/CloseLeavesNothing).
//
// Faults that only the harness can inject are Hooks. A test that needs a
// missing hook fails, unless the harness declared it cannot provide it
// (WithoutHooks), in which case the test skips and names it. Package
// conformance/harness starts private servers that provide every hook.
// WithSharedClient gives the suite two backends over one client, to check
// that Close leaves the caller's client working. Tests that depend on
// timing use short leases in real time; run them on a machine that is not
// overloaded.
package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// Hooks are the faults and observations a harness can provide. Each is
// optional.
type Hooks struct {
	// FlushScripts empties the server's script cache (SCRIPT FLUSH).
	FlushScripts func(ctx context.Context) error
	// KillPubSub closes every pub/sub client connection on the server
	// (CLIENT KILL TYPE pubsub).
	KillPubSub func(ctx context.Context) error
	// PubSubClients counts the server's pub/sub connections (CLIENT LIST
	// TYPE pubsub).
	PubSubClients func(ctx context.Context) (int, error)
	// Restart stops and restarts the server on the same address, dropping
	// every connection. Data may be lost.
	Restart func(ctx context.Context) error
	// Subscribers counts the server's subscriptions to channel (PUBSUB
	// NUMSUB), on every node of a cluster. Without it, the suite counts a
	// PUBLISH's receivers, which a cluster node knows only of its own.
	Subscribers func(ctx context.Context, channel string) (int, error)
	// ConnectionsReceived reports how many client connections the server
	// has accepted (INFO stats total_connections_received), on every node
	// of a cluster, less those the harness opened itself. Without it, the
	// suite asks a script, which a cluster runs on one node.
	ConnectionsReceived func(ctx context.Context) (int64, error)
	// Masters counts the masters of a cluster. A sharded backend may keep a
	// pub/sub connection per master; without the hook the suite does not
	// bound a sharded backend's pub/sub connections.
	Masters func(ctx context.Context) (int, error)
}

// Option configures Run.
type Option func(*suite)

// WithHooks gives the suite the harness's fault hooks.
func WithHooks(h Hooks) Option {
	return func(s *suite) { s.hooks = h }
}

// WithoutHooks declares the hooks the harness cannot provide, by their
// field names in Hooks ("FlushScripts", "KillPubSub", "PubSubClients",
// "Restart"), or "SharedClient" for WithSharedClient: the tests that need
// them skip. A test whose hook is missing and not declared fails.
// Subscribers and ConnectionsReceived are optional: without them the suite
// asks the server through scripts.
func WithoutHooks(names ...string) Option {
	return func(s *suite) {
		for _, n := range names {
			s.without[n] = true
		}
	}
}

// WithTimeout sets each test's deadline. The default is 60s.
func WithTimeout(d time.Duration) Option {
	return func(s *suite) { s.timeout = d }
}

// WithHealthCheck tells the suite how often the backends newBackend returns
// ping an idle pub/sub connection. The test that idle connections are not
// redialled waits three of these intervals. The default, 5s, is the
// interval of the redigo and go-redis adapters; a harness that sets a
// shorter one on its backends shortens that test. A d of zero or less
// leaves the default.
func WithHealthCheck(d time.Duration) Option {
	return func(s *suite) {
		if d > 0 {
			s.healthCheck = d
		}
	}
}

// WithLeakOptions passes options to the suite's goroutine leak check, for
// goroutines the harness itself starts during the suite, such as those of an
// embedded server restarted by the Restart hook.
func WithLeakOptions(opts ...goleak.Option) Option {
	return func(s *suite) { s.leakOpts = append(s.leakOpts, opts...) }
}

// NewBackend returns a backend connected to the server under test.
type NewBackend func(t *testing.T) backend.Backend

// Run runs the whole suite.
func Run(t *testing.T, newBackend NewBackend, opts ...Option) {
	s := &suite{newBackend: newBackend, timeout: 60 * time.Second, healthCheck: 5 * time.Second, without: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	leakOpts := append([]goleak.Option{
		goleak.IgnoreCurrent(),
		// A server restarted by package harness's Restart hook.
		goleak.IgnoreAnyFunction("github.com/dsyncgo/dsync/conformance/harness.waitExit"),
	}, s.leakOpts...)
	t.Run("Backend", s.backendTests)
	t.Run("Mutex", func(t *testing.T) { s.exclusiveTests(t, mutexKind) })
	t.Run("FairLock", func(t *testing.T) {
		s.exclusiveTests(t, fairlockKind)
		s.fairlockTests(t)
	})
	t.Run("RWLock", func(t *testing.T) {
		s.exclusiveTests(t, rwlockWriteKind)
		s.rwlockTests(t)
	})
	t.Run("Semaphore", s.semaphoreTests)
	t.Run("MultiLock", s.multilockTests)
	t.Run("Election", s.electionTests)
	if !t.Failed() {
		goleak.VerifyNone(t, leakOpts...)
	}
}

type suite struct {
	newBackend  NewBackend
	hooks       Hooks
	without     map[string]bool // hooks the harness declared it lacks
	timeout     time.Duration
	healthCheck time.Duration
	leakOpts    []goleak.Option

	sharedClient NewSharedClient

	// gate lets ordinary tests run together and disruptive ones alone.
	gate sync.RWMutex
}

// test runs fn as a parallel subtest. An exclusive test runs with no other
// test of the suite alongside: those that disturb the server, and those
// that load it so heavily that short leases elsewhere could expire.
func (s *suite) test(t *testing.T, name string, exclusive bool, fn func(t *testing.T, ctx context.Context)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		if exclusive {
			s.gate.Lock()
			defer s.gate.Unlock()
		} else {
			s.gate.RLock()
			defer s.gate.RUnlock()
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		fn(t, ctx)
	})
}

// rule is one case of the suite: a test and the rule it checks, which is
// logged when the test fails.
type rule struct {
	name, rule string
	exclusive  bool // run alone (see test)
	fn         func(*testing.T, context.Context)
}

// rules runs each case as a subtest of t (see test).
func (s *suite) rules(t *testing.T, rs []rule) {
	for _, r := range rs {
		s.test(t, r.name, r.exclusive, func(t *testing.T, ctx context.Context) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rule: %s", r.rule)
				}
			})
			r.fn(t, ctx)
		})
	}
}

// prefix returns a random key prefix for one test.
func prefix() string { return "dsynctest:" + dsync.NewID()[:12] }

// needHook fails t when the hook a test needs is missing, or skips it
// when the harness declared it cannot provide it (WithoutHooks): a hook
// left out by oversight must not pass the suite unnoticed.
func (s *suite) needHook(t *testing.T, hook string, present bool) {
	t.Helper()
	switch {
	case present:
	case s.without[hook]:
		t.Skipf("harness provides no %s hook (WithoutHooks)", hook)
	case hook == "SharedClient":
		t.Fatalf("no two backends over one client: pass conformance.WithSharedClient, or declare conformance.WithoutHooks(%q)", hook)
	default:
		t.Fatalf("harness provides no %s hook: provide it (package conformance/harness has every hook), or declare conformance.WithoutHooks(%q)", hook, hook)
	}
}

// within fails t if the event does not arrive within d.
func within[T any](t *testing.T, d time.Duration, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, d)
		panic("unreachable")
	}
}

func must(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
