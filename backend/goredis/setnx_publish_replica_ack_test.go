package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// TestSetNXPublishWithReplicaAck: with WithReplicaAck, SetNXPublish waits
// for the replica's acknowledgement as SetNX does (its WAIT follows the
// SET and the PUBLISH in their pipeline): refused with ErrNotReplicated
// while the replica is cut off, and once it is back, a SET that succeeds
// is on the replica when the call returns.
func TestSetNXPublishWithReplicaAck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := harness.NewSentinel(t)
	b := failoverBackend(t, s, goredis.WithReplicaAck(1, 200*time.Millisecond))

	awake := cutReplica(t, ctx, s, time.Second)
	ok, err := b.SetNXPublish(ctx, "cut", "v", time.Minute, "ch", "hint")
	if !errors.Is(err, goredis.ErrNotReplicated) {
		t.Errorf("SetNXPublish while no replica acknowledges: %v, %v; want ErrNotReplicated", ok, err)
	}
	<-awake

	// The replica reconnects and syncs; until then, calls are refused.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		ok, err = b.SetNXPublish(ctx, "acked", "v", time.Minute, "ch", "hint")
		if !errors.Is(err, goredis.ErrNotReplicated) {
			break
		}
		if time.Now().After(deadline) || i > 1000 {
			t.Fatalf("SetNXPublish still not acknowledged 20s after the replica woke: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // the replica's resync is what is waited for
	}
	if !ok || err != nil {
		t.Fatalf("SetNXPublish with the replica back: %v, %v; want true", ok, err)
	}
	if v, err := redigo.String(s.Replica().Do(ctx, "GET", "acked")); v != "v" || err != nil {
		t.Errorf("the replica, when SetNXPublish returned: GET = %q, %v; want \"v\": it returned before the replica acknowledged", v, err)
	}
}
