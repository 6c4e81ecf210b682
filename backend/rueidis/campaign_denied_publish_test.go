package rueidis_test

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestCampaignDeniedPublish: a campaign through a user that may write the
// election's keys but not publish on its observe channel fails at once,
// and leaves nothing on the server (see harness.CampaignDeniedPublish).
func TestCampaignDeniedPublish(t *testing.T) {
	srv := harness.Standalone(t)
	harness.CampaignDeniedPublish(t, srv.Node(), func(t *testing.T, user, password string) backend.Backend {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, Username: user, Password: password})
		if err != nil {
			t.Fatal(err)
		}
		b := dsyncrueidis.New(c)
		t.Cleanup(func() {
			b.Close()
			c.Close()
		})
		return b
	})
}
