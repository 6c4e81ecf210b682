package election_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// stallingReads is a backend whose first stalls reads of the election
// hang until their context ends, as calls to a stalled server do when
// the client's own timeout is no shorter than the caller's.
type stallingReads struct {
	backend.Backend
	stalls atomic.Int32 // reads left to stall
	reads  atomic.Int32
}

func (b *stallingReads) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if s == election.ReadScript {
		b.reads.Add(1)
		if b.stalls.Add(-1) >= 0 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return b.Backend.Eval(ctx, s, keys, args...)
}

// An observer whose read times out on a stalled server reads again once
// it answers: a read that ran past the observer's own bound is a failure
// to reach the server, as a broken connection is, and not one to give up
// on until the next change, which may never come.
func TestObserverRetriesAReadPastItsTimeout(t *testing.T) {
	defer election.SetCallTimeout(200 * time.Millisecond)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testserver.Real(t)
	p := "dsynctest:" + t.Name()
	leader := election.New(srv.NewBackend(t), "stalled-read", election.WithPrefix(p), election.WithLogger(nil))
	term, err := leader.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())

	sb := &stallingReads{Backend: srv.NewBackend(t)}
	sb.stalls.Store(1)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	observed := election.New(sb, "stalled-read", election.WithPrefix(p), election.WithLogger(nil)).Observe(octx)
	select {
	case l := <-observed:
		if l.Value != "v" {
			t.Fatalf("observed %+v; want the leader with value v", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no leader observed 5s after a first read that timed out (%d reads); want it read again", sb.reads.Load())
	}
	if n := sb.reads.Load(); n < 2 {
		t.Fatalf("%d reads; want the timed-out one and another", n)
	}
}
