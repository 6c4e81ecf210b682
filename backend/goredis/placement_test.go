package goredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestClusterSubscribesOnTheSlotsMaster checks that, on a cluster, each
// channel is subscribed on the master serving its hash slot (where the
// scripts publishing on it run, so that a wake-up does not cross the
// cluster bus), with one pub/sub connection per master, and that every
// subscription still receives.
func TestClusterSubscribesOnTheSlotsMaster(t *testing.T) {
	cl := harness.NewCluster(t, 3)
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer c.Close()
	b := goredis.New(c)
	defer b.Close()
	const channels = 60
	var subs []backend.Subscription
	for i := range channels {
		sub, err := b.Subscribe(ctx, fmt.Sprintf("{place%d}:wake", i))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs = append(subs, sub)
	}
	conns, err := cl.Hooks().PubSubClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if conns != len(cl.Nodes()) {
		t.Errorf("%d pub/sub connections for channels on %d masters, want one per master", conns, len(cl.Nodes()))
	}
	placed := map[string]string{} // channel → the node it is subscribed on
	for _, n := range cl.Nodes() {
		names, err := redigo.Strings(n.Do(ctx, "PUBSUB", "CHANNELS", "{place*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			placed[name] = n.Addr()
		}
	}
	for i := range channels {
		name := fmt.Sprintf("{place%d}:wake", i)
		m, err := c.MasterForKey(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := placed[name], m.Options().Addr; got != want {
			t.Errorf("%s subscribed on %q, want its slot's master %s", name, got, want)
		}
		// A script on the slot's master publishes; the subscriber hears it.
		if err := c.Eval(ctx, "return redis.call('PUBLISH', KEYS[1], 'w')", []string{name}).Err(); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := subs[i].Receive(rctx)
		cancel()
		if err != nil || msg.Payload != "w" {
			t.Fatalf("%s: %+v, %v", name, msg, err)
		}
	}
}
