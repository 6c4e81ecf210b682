package harness

import (
	"context"
	"testing"

	"github.com/dsyncgo/dsync/conformance"
)

// Server is a standalone redis-server.
type Server struct {
	node *Node
}

// StartServer starts a private standalone redis-server, with args (such
// as "--appendonly", "yes") after the harness's own, which they override.
// The caller stops it with Close.
func StartServer(ctx context.Context, args ...string) (*Server, error) {
	n, err := startNode(ctx, false, "", args...)
	if err != nil {
		return nil, err
	}
	return &Server{node: n}, nil
}

// Standalone starts a private redis-server for t, stopped when t ends. It
// skips t when redis-server is not on PATH (fails it under
// DSYNC_REQUIRE_REDIS=1).
func Standalone(t testing.TB) *Server {
	t.Helper()
	skipUnavailable(t)
	s, err := StartServer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.node.Addr() }

// Node returns the server's process.
func (s *Server) Node() *Node { return s.node }

// Hooks returns every conformance hook, acting on the server.
func (s *Server) Hooks() conformance.Hooks {
	return hooks(func() []*Node { return []*Node{s.node} }, s.node.Restart)
}

// Close stops the server and removes its files. It is idempotent.
func (s *Server) Close() { s.node.close() }
