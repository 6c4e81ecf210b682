package fault

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/tests/fake"
)

func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	// A toxic's goroutine in toxiproxy may stay blocked on its link's
	// channel after the proxy stopped, when a toxic was removed with
	// connections open (as the soak's lost replies and latency end): the
	// proxy's own, not a goroutine of dsync's.
	testserver.MainWith(m, []goleak.Option{goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run")}, fake.StopShared)
}
