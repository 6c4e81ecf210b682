package redigo_test

import (
	"testing"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/conformance"
	"github.com/dsyncgo/dsync/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }

func hooks(s *testserver.Server) conformance.Hooks {
	h := conformance.Hooks{FlushScripts: s.FlushScripts}
	if s.Restartable() {
		h.Restart = s.Restart
	}
	if s.Kind == "redis" {
		h.KillPubSub = s.KillPubSub
		h.PubSubClients = s.PubSubClients
	}
	return h
}

func TestConformance(t *testing.T) {
	for _, kind := range []string{"redis", "miniredis"} {
		t.Run(kind, func(t *testing.T) {
			var srv *testserver.Server
			if kind == "redis" {
				srv = testserver.Real(t)
			} else {
				srv = testserver.Mini(t)
			}
			conformance.Run(t, func(t *testing.T) backend.Backend {
				return srv.NewBackend(t)
			}, conformance.WithHooks(hooks(srv)), conformance.WithLeakOptions(testserver.LeakOptions()...))
		})
	}
}
