package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestCampaignDeniedPublish: a campaign through a user that may write the
// election's keys but not publish on its observe channel fails at once,
// and leaves nothing on the server (see harness.CampaignDeniedPublish).
func TestCampaignDeniedPublish(t *testing.T) {
	srv := harness.Standalone(t)
	harness.CampaignDeniedPublish(t, srv.Node(), func(t *testing.T, user, password string) backend.Backend {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: password, ContextTimeoutEnabled: true})
		b := goredis.New(c)
		t.Cleanup(func() {
			b.Close()
			c.Close()
		})
		return b
	})
}
