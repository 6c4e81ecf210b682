package goredis_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// A server that refuses SUBSCRIBE (an ACL user with no channel): the
// pub/sub connection answers the dial's PING, then the refusal; it is
// redialled with a growing backoff, not every 10-20ms.
func TestRefusedSubscribeBacksOff(t *testing.T) {
	srv := harness.Standalone(t)
	user := "nochan-" + dsync.NewID()[:8]
	if _, err := srv.Node().Do(context.Background(), "ACL", "SETUSER", user, "on", ">pw", "~*", "resetchannels", "+@all"); err != nil {
		t.Fatal(err)
	}
	defer srv.Node().Do(context.Background(), "ACL", "DELUSER", user)
	var dials atomic.Int64
	c := redis.NewClient(&redis.Options{
		Addr: srv.Addr(), Username: user, Password: "pw",
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	defer c.Close()
	b := goredis.New(c)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := b.Subscribe(ctx, "ch"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe refused by the ACL: %v; want context.DeadlineExceeded", err)
	}
	if n := dials.Load(); n > 15 {
		t.Errorf("%d dials in 1s to a server that refuses SUBSCRIBE; want the backoff to keep them under 15", n)
	}
}
