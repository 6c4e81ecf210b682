package rueidis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestClusterSubscribesOnTheSlotsMaster checks that, on a cluster, each
// channel is subscribed on the master serving its hash slot (the node
// that answers a command on it without MOVED), one pub/sub connection per
// master, and that every subscription receives what a script publishes.
func TestClusterSubscribesOnTheSlotsMaster(t *testing.T) {
	cl := harness.NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := dsyncrueidis.New(c)
	defer b.Close()
	publish := backend.NewScript("return redis.call('PUBLISH', KEYS[1], 'w')")
	for i := range 30 {
		name := fmt.Sprintf("{place%d}:wake", i)
		sub, err := b.Subscribe(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		for _, n := range cl.Nodes() {
			_, moved := n.Do(ctx, "EXISTS", name)
			names, err := redigo.Strings(n.Do(ctx, "PUBSUB", "CHANNELS", name))
			if err != nil {
				t.Fatal(err)
			}
			if subscribed := len(names) == 1; subscribed != (moved == nil) {
				t.Errorf("%s subscribed on %s: %v; the node serves its slot: %v", name, n.Addr(), subscribed, moved == nil)
			}
		}
		if _, err := b.Eval(ctx, publish, []string{name}); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.Receive(ctx); err != nil || m.Payload != "w" {
			t.Fatalf("%s: %+v, %v", name, m, err)
		}
	}
	if n, err := cl.Hooks().PubSubClients(ctx); err != nil || n != len(cl.Nodes()) {
		t.Errorf("%d pub/sub connections (%v) for channels on %d masters, want one per master", n, err, len(cl.Nodes()))
	}
}
