package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// TestSentinelRidesOutAStall: a primary that does not answer for 3s stays
// the primary. Sentinel set to find it down after 1s fails it over then,
// and a loaded test machine stalled one long enough in the middle of an
// adapter's conformance run (IdlePubSubStaysOneConnection saw the backend
// redial to the new primary).
func TestSentinelRidesOutAStall(t *testing.T) {
	testserver.Long(t, "a Sentinel set")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := harness.NewSentinel(t)
	primary := s.Primary().Addr()
	if _, err := s.Primary().Do(ctx, "DEBUG", "SLEEP", 3); err != nil {
		t.Fatal(err)
	}
	// Sentinel pings every second: give it two more to act on the stall.
	time.Sleep(2 * time.Second)
	c, err := redis.DialContext(ctx, "tcp", s.SentinelAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := redis.Strings(redis.DoContext(c, ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", harness.MasterName))
	if err != nil || len(a) != 2 {
		t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME: %q, %v", a, err)
	}
	if got := a[0] + ":" + a[1]; got != primary {
		t.Errorf("after a stall of 3s Sentinel names %s the primary, want %s: it failed over", got, primary)
	}
}
