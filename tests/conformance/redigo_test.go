package conformance_test

import (
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/tests/fake"
)

func TestMain(m *testing.M) { testserver.Main(m, fake.StopShared) }

// TestRedigoOnMiniredis runs the suite with the redigo adapter on an
// embedded miniredis, which cannot kill clients or count them: those cases
// skip, as declared. Its calls do not share round trips: miniredis runs
// Lua some hundred times slower than Redis under -race, so that a batch of
// the hundreds of acquisitions of Mutex/ManyGoroutines takes seconds to
// answer, and a release sent behind it outlasts a handed hold's lease.
// The adapter's own suite runs the pipelined calls on redis-server. For
// the same reason a call may wait longer than the adapter's default 10s
// for its turn: a server that runs one script at a time, milliseconds
// each, answers hundreds of waiters' attempts and heartbeats in turn.
func TestRedigoOnMiniredis(t *testing.T) {
	srv := fake.Mini(t)
	conformance.Run(t, func(t *testing.T) backend.Backend {
		return srv.NewBackend(t, redigo.WithHealthCheck(time.Second), redigo.WithPipelining(false),
			redigo.WithTimeout(time.Minute))
	}, conformance.WithHealthCheck(time.Second), conformance.WithHooks(conformance.Hooks{
		FlushScripts: srv.FlushScripts,
		Restart:      srv.Restart,
	}), conformance.WithoutHooks("KillPubSub", "KillClients", "PubSubClients"),
		conformance.WithLeakOptions(fake.LeakOptions()...),
		conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
			return srv.NewBackendPair(t)
		}))
}
