package redigo_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// TestConformance runs the suite on a real redis-server (skipped, or
// failed with DSYNC_REQUIRE_REDIS=1, when there is none); the tests module
// runs it on miniredis too.
func TestConformance(t *testing.T) {
	srv := testserver.Real(t)
	hooks := conformance.Hooks{
		FlushScripts:  srv.FlushScripts,
		KillPubSub:    srv.KillPubSub,
		PubSubClients: srv.PubSubClients,
		KillClients: func(ctx context.Context) error {
			_, err := srv.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
			return err
		},
	}
	var lacks []string
	if srv.Restartable() {
		hooks.Restart = srv.Restart
	} else {
		lacks = append(lacks, "Restart") // $DSYNC_REDIS_ADDR: not ours to restart
	}
	conformance.Run(t, func(t *testing.T) backend.Backend {
		return srv.NewBackend(t, redigo.WithHealthCheck(time.Second))
	}, conformance.WithHealthCheck(time.Second), conformance.WithHooks(hooks), conformance.WithoutHooks(lacks...),
		conformance.WithSharedClient(func(t *testing.T) (backend.Backend, backend.Backend) {
			pool := srv.Pool()
			t.Cleanup(func() { pool.Close() })
			a, b := redigo.New(pool), redigo.New(pool)
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		}))
}
