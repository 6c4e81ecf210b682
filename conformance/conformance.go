// Package conformance is the test suite every dsync backend adapter runs:
// the backend contract (see package backend) and the behaviour of every
// primitive, on whatever server the adapter talks to.
//
// It has two entry points. RunBackend checks the adapter's rules alone,
// a few dozen cases with a note on what each failure usually means: an
// adapter's author makes it pass first. Run checks them again and then
// runs every primitive over the adapter: what an adapter must pass before
// it is used.
//
// An adapter's test calls RunBackend and Run with a function returning a
// fresh backend.
// examples/conformance/conformance_test.go in the dsync repository is a
// complete file to copy; its heart:
//
//	func TestConformance(t *testing.T) {
//		srv := harness.Standalone(t)
//		conformance.Run(t, func(t *testing.T) backend.Backend {
//			c := myclient.New(srv.Addr())
//			b := myadapter.New(c)
//			t.Cleanup(func() { b.Close(); c.Close() })
//			return b
//		}, conformance.WithHooks(srv.Hooks()),
//			conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
//				c := myclient.New(srv.Addr())
//				a, b := myadapter.New(c), myadapter.New(c)
//				t.Cleanup(func() { a.Close(); b.Close(); c.Close() })
//				return a, b
//			}))
//	}
//
// Until dsync is tagged, an adapter in a module of its own requires it
// through a checkout of the repository:
//
//	go mod edit -replace github.com/dsyncgo/dsync=../dsync
//	go mod tidy
//
// A slow machine widens the suite's timing bounds with WithTimeScale or
// $DSYNC_CONFORMANCE_TIMESCALE (see TimeScaleEnv).
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
// names and run side by side, three at a time whatever -parallel says
// (they mostly wait), except those that disturb the whole server (killing
// connections, restarting, pausing) or load it heavily, which run alone.
// Each has its own deadline.
//
// # Goroutines
//
// Run fails if a goroutine started during the suite is still running at
// its end. Backend/CloseLeavesNothing is stricter: it makes one call on a
// fresh backend, so that the client starts what it starts lazily (pools,
// topology refreshers), then takes note of the goroutines running, uses
// the backend, closes it, and fails if a goroutine started since is still
// running (or a pub/sub connection of the backend is still open). The
// client's own goroutines count too: one a client keeps past Close, or
// past its own Close (rueidis closes connections dropped from a cluster's
// topology 5s later, on a goroutine of its own), is named to both checks
// with WithLeakOptions, and to goleak in the package's TestMain.
//
// The goroutines of a client that opens connections in the background
// after its first call (radix v4's pools fill so) count as well. Either
// build the test's clients with their pools full before returning them
// (radix: wait for the pool's InitCompleted trace), at the cost of every
// pool's dials up front for each of the suite's backends; or name the
// client's connection goroutines with WithLeakOptions, at the cost of the
// check's sight of them: a connection the adapter opens through the
// client and leaks (its pub/sub connection) then passes unseen.
//
// # Hooks
//
// Faults that only the harness can inject are Hooks. A test that needs a
// missing hook fails, unless the harness declared it cannot provide it
// (WithoutHooks), in which case the test skips and names it: a hook left
// out by oversight must not pass the suite unnoticed. Package
// conformance/harness starts private servers that provide the hooks: a
// standalone server and a cluster every one, a Sentinel set every one but
// Restart (pass WithoutHooks("Restart") with its Hooks). On a Sentinel
// set the suite runs against the primary and fails no primary over; an
// adapter tests failover on its own, with harness.Sentinel.KillPrimary
// (see package backend).
// WithSharedClient gives the suite two backends over one client, to check
// that Close leaves the caller's client working; without it, declare
// WithoutHooks("SharedClient").
//
// # Timing
//
// Tests that depend on timing use short leases in real time and hold
// backends to latency bounds (a hand-off within 50ms, a cancelled call
// back within 150ms, ...). On a slow or loaded machine, widen every bound
// by a factor with WithTimeScale or $DSYNC_CONFORMANCE_TIMESCALE; unset,
// the bounds are as stated. Widen them when the failures are bounds
// ("nothing within", "returned after") that pass on an idle machine: a
// shared CI runner, -race on two cores, a loaded laptop. A scale forgives
// slowness only: a rule the backend breaks fails at any scale. The
// release cases (ReleaseKeepsDeadline and the like) hold dsync to its own
// contract, a release back by its deadline plus 100ms, and allow instead
// for the stalls of the test's process that they measure.
//
// # Changes
//
// The suite grows as the contract is made precise, and a new case can
// fail an adapter that passed before. CHANGES.md at the repository's root
// lists each such change and what to do.
package conformance

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
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
	// KillClients closes every normal client connection on the server
	// (CLIENT KILL TYPE normal), on every node of a cluster: the
	// connections that calls use, pooled or pipelined. The harness's own
	// connection, and Sentinel's, are spared.
	KillClients func(ctx context.Context) error
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
// field names in Hooks ("FlushScripts", "KillPubSub", "KillClients",
// "PubSubClients", "Restart"), or "SharedClient" for WithSharedClient: the tests that need
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

// WithTimeout sets each test's deadline. The default is 60s. The time
// scale applies to it too.
func WithTimeout(d time.Duration) Option {
	return func(s *suite) { s.timeout = d }
}

// TimeScaleEnv names the environment variable that sets the time scale
// when WithTimeScale is not given: DSYNC_CONFORMANCE_TIMESCALE=3 go test.
const TimeScaleEnv = "DSYNC_CONFORMANCE_TIMESCALE"

// WithTimeScale widens the suite's timing bounds by factor f (1 or more),
// for slow or loaded machines: every bound a test holds a backend to (a
// hand-off within 50ms, a cancelled call back within 150ms, a gap within
// 1s, an event within 5s, ...) and each test's deadline are multiplied by
// f. Nothing else changes: leases, lower bounds ("waited at least ...")
// and the rules themselves stay as they are, so a scale only forgives
// slowness; a backend that breaks a rule fails at any scale. Unset, the
// scale is that of $DSYNC_CONFORMANCE_TIMESCALE, or 1. A value below 1
// (or not a number) fails the suite: bounds never narrow.
func WithTimeScale(f float64) Option {
	return func(s *suite) { s.scale = f }
}

// WithHealthCheck tells the suite how often the backends newBackend returns
// ping an idle pub/sub connection. The test that idle connections are not
// redialled waits three of these intervals. The default, 5s, is the
// interval of the shipped adapters (backend.MuxOptions); a harness that
// sets a shorter one on its backends shortens that test. For a client
// that pings its pub/sub connections by itself, give its interval, or any
// duration you are content to wait three times: the test checks that no
// connection is redialled meanwhile, whoever pings. A d of zero or less
// leaves the default.
func WithHealthCheck(d time.Duration) Option {
	return func(s *suite) {
		if d > 0 {
			s.healthCheck = d
		}
	}
}

// WithLeakOptions passes options to the suite's goroutine leak checks
// (see Goroutines in the package documentation): for goroutines the
// client library keeps on its own, even past its Close, or starts in the
// background after the backend's first call, such as
//
//	conformance.WithLeakOptions(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"))
//
// and for those the harness starts during the suite, such as an embedded
// server's restarted by the Restart hook. Never use it for the adapter's
// own goroutines: Close must end them.
func WithLeakOptions(opts ...goleak.Option) Option {
	return func(s *suite) { s.leakOpts = append(s.leakOpts, opts...) }
}

// NewBackend returns a backend connected to the server under test.
type NewBackend func(t *testing.T) backend.Backend

// Run runs the whole suite: the backend contract (as RunBackend does),
// then every primitive over the adapter.
func Run(t *testing.T, newBackend NewBackend, opts ...Option) {
	s, leakOpts := newSuite(t, newBackend, opts)
	s.groups(t, []caseGroup{
		{"Backend", s.backendRules()},
		{"Mutex", s.exclusiveRules(mutexKind)},
		{"FairLock", append(s.exclusiveRules(fairlockKind), s.fairlockRules()...)},
		{"RWLock", append(s.exclusiveRules(rwlockWriteKind), s.rwlockRules()...)},
		{"Semaphore", append(s.semaphoreRules(), s.permitRules()...)},
		{"MultiLock", s.multilockRules()},
		{"Election", s.electionRules()},
		{"WaitGroup", s.waitgroupRules()},
	})
	if !t.Failed() {
		goleak.VerifyNone(t, leakOpts...)
	}
}

// newSuite makes the suite that Run and RunBackend run, and the options
// of their final goroutine leak check.
func newSuite(t *testing.T, newBackend NewBackend, opts []Option) (*suite, []goleak.Option) {
	s := &suite{newBackend: newBackend, slots: make(chan struct{}, maxCases), timeout: 60 * time.Second, scale: 1, healthCheck: 5 * time.Second, without: map[string]bool{}}
	if v := os.Getenv(TimeScaleEnv); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("conformance: $%s=%q: not a number", TimeScaleEnv, v)
		}
		s.scale = f
	}
	for _, o := range opts {
		o(s)
	}
	if !(s.scale >= 1) || math.IsInf(s.scale, 0) {
		t.Fatalf("conformance: time scale %v: want 1 or more (a scale only widens bounds)", s.scale)
	}
	if s.scale != 1 {
		t.Logf("conformance: timing bounds widened %gx", s.scale)
	}
	s.timeout = s.bound(s.timeout)
	leakOpts := append([]goleak.Option{
		goleak.IgnoreCurrent(),
		// A server restarted by package harness's Restart hook.
		goleak.IgnoreAnyFunction("github.com/dsyncgo/dsync/conformance/harness.waitExit"),
	}, s.leakOpts...)
	return s, leakOpts
}

type suite struct {
	newBackend  NewBackend
	hooks       Hooks
	without     map[string]bool // hooks the harness declared it lacks
	timeout     time.Duration
	scale       float64 // of timing bounds, 1 or more (WithTimeScale)
	healthCheck time.Duration
	leakOpts    []goleak.Option

	sharedClient NewSharedClient

	// slots bounds how many ordinary cases run at once (maxCases), and
	// alone lets exclusive ones run one at a time (see groups).
	slots chan struct{}
	alone sync.Mutex
}

// maxCases is how many ordinary cases of the suite run at once. They
// mostly wait (on leases, hand-offs, timeouts), so they share the machine
// well; they run as subtests of their own rather than t.Parallel ones,
// whose number -parallel caps at GOMAXPROCS.
const maxCases = 3

// caseGroup is a subtest of the suite: its cases, under one name.
type caseGroup struct {
	name  string
	rules []rule
}

// groups runs the groups as subtests of t and returns when every case has
// ended: first the ordinary cases of all groups, up to maxCases at once,
// then the exclusive ones, one at a time with nothing else of the suite
// alongside: those that disturb the server, and those that load it so
// heavily that short leases elsewhere could expire.
func (s *suite) groups(t *testing.T, gs []caseGroup) {
	var ordinary, all sync.WaitGroup
	for _, g := range gs {
		for _, r := range g.rules {
			if !r.exclusive {
				ordinary.Add(1)
			}
		}
	}
	for _, g := range gs {
		all.Go(func() {
			ran := false
			t.Run(g.name, func(t *testing.T) {
				ran = true
				var cases sync.WaitGroup
				for _, r := range g.rules {
					cases.Go(func() {
						s.test(t, r, &ordinary)
						if !r.exclusive {
							// Counted whether it ran or -run left it out.
							ordinary.Done()
						}
					})
				}
				cases.Wait()
			})
			if !ran { // -run left the whole group out
				for _, r := range g.rules {
					if !r.exclusive {
						ordinary.Done()
					}
				}
			}
		})
	}
	all.Wait()
}

// rule is one case of the suite: a test and the rule it checks, which is
// logged when the test fails.
type rule struct {
	name, rule string
	exclusive  bool // run alone (see groups)
	fn         func(*testing.T, context.Context)
}

// test runs r as a subtest of t, with a deadline of its own: an ordinary
// case in one of maxCases slots, an exclusive one alone once the ordinary
// cases have ended.
func (s *suite) test(t *testing.T, r rule, ordinary *sync.WaitGroup) {
	t.Run(r.name, func(t *testing.T) {
		// The place is given up by the case's first clean-up, which runs
		// last: after the backends the case made are closed, so that an
		// exclusive case never meets the previous one's connections.
		if r.exclusive {
			ordinary.Wait()
			s.alone.Lock()
			t.Cleanup(s.alone.Unlock)
		} else {
			s.slots <- struct{}{}
			t.Cleanup(func() { <-s.slots })
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("rule: %s", r.rule)
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		r.fn(t, ctx)
	})
}

// bound returns the timing bound d, widened by the time scale.
func (s *suite) bound(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.scale)
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
