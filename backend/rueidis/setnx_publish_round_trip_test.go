package rueidis_test

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestSetNXPublishOneRoundTrip: the SET and the PUBLISH of SetNXPublish
// reach the server in one read (see harness.SetNXPublishOneRoundTrip).
func TestSetNXPublishOneRoundTrip(t *testing.T) {
	srv := harness.Standalone(t)
	harness.SetNXPublishOneRoundTrip(t, srv.Node(), func(pipelining bool) (backend.Backend, func()) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		b := dsyncrueidis.New(c, dsyncrueidis.WithPipelining(pipelining))
		return b, func() { b.Close(); c.Close() }
	})
}
