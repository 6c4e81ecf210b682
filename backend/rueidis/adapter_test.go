package rueidis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	dsyncrueidis "github.com/dsyncgo/dsync/backend/rueidis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

var one = backend.NewScript("return 1")

func TestNilClient(t *testing.T) {
	b := dsyncrueidis.New(nil)
	defer b.Close()
	if _, err := b.Eval(context.Background(), one, nil); !errors.Is(err, dsync.ErrInvalidBackend) {
		t.Errorf("Eval: %v, want ErrInvalidBackend", err)
	}
	if _, err := b.Subscribe(context.Background(), "x"); !errors.Is(err, dsync.ErrInvalidBackend) {
		t.Errorf("Subscribe: %v, want ErrInvalidBackend", err)
	}
}

// TestClientOwnership: Close leaves the caller's client open, and a
// client the caller closed makes calls fail with ErrClosed, which no
// retry can cure, rather than a transient error.
func TestClientOwnership(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := harness.Standalone(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	b := dsyncrueidis.New(c)
	sub, err := b.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	b.Close()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("the client after the backend's Close: %v", err)
	}
	b2 := dsyncrueidis.New(c)
	defer b2.Close()
	c.Close()
	if _, err := b2.Eval(ctx, one, nil); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Eval through a closed client: %v, want ErrClosed", err)
	}
}

// TestCrossSlotOnCluster: keys of two slots in one call are refused as
// the server refuses them (rueidis's command builder would panic).
func TestCrossSlotOnCluster(t *testing.T) {
	cl := harness.NewCluster(t, 3)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := dsyncrueidis.New(c)
	defer b.Close()
	_, err = b.Eval(context.Background(), one, []string{"{a}x", "{b}x"})
	var se *backend.ServerError
	if !errors.As(err, &se) || se.Prefix() != "CROSSSLOT" {
		t.Errorf("Eval across slots: %v, want a CROSSSLOT *backend.ServerError", err)
	}
	if !b.Sharded() {
		t.Error("a cluster client's backend does not report Sharded")
	}
}
