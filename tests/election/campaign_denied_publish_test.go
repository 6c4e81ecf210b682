package election_test

import (
	"context"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// A campaign through a user that may write the election's keys but not
// publish on its observe channel fails at once, through redigo's backend
// (its SetNXPublish) and through the acquire script, and leaves nothing on
// the server (see harness.CampaignDeniedPublish).
func TestCampaignDeniedPublish(t *testing.T) {
	srv := harness.Standalone(t)
	harness.CampaignDeniedPublish(t, srv.Node(), func(t *testing.T, user, password string) backend.Backend {
		return userBackend(t, srv.Addr(), user, password)
	})
}

// userBackend returns a redigo backend that authenticates as user with
// password, closed when t ends.
func userBackend(t *testing.T, addr, user, password string) backend.Backend {
	pool := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, "tcp", addr, redis.DialUsername(user), redis.DialPassword(password))
	}}
	b := bredigo.New(pool)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b
}
