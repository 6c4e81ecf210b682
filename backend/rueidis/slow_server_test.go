package rueidis_test

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// A server that answers late, or stalls, with a context that can be
// cancelled but has no deadline: rueidis pipelines the calls of many
// callers over one connection, which a call cut by its deadline must not
// poison for the others.
func TestSlowServer(t *testing.T) {
	harness.SlowServer(t, func(t *testing.T, addr string) backend.Backend {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			t.Fatal(err)
		}
		b := dsyncrueidis.New(c)
		t.Cleanup(func() { b.Close(); c.Close() })
		return b
	})
}
