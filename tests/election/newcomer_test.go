package election_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/tests/fake"
)

// terms records who led, in order.
type terms struct {
	mu    sync.Mutex
	names []string
}

// leadAndRecord starts e.Campaign in the background; once it leads, it
// records name in o, resigns, and sends the error (nil) on the channel it
// returns.
func (o *terms) leadAndRecord(ctx context.Context, e *election.Election, name string) <-chan error {
	got := make(chan error, 1)
	go func() {
		term, err := e.Campaign(ctx, name)
		if err != nil {
			got <- err
			return
		}
		o.mu.Lock()
		o.names = append(o.names, name)
		o.mu.Unlock()
		got <- term.Resign(ctx)
	}()
	return got
}

func (o *terms) order() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.names...)
}

// awaitErr returns what c carries, or fails t if nothing comes within a
// minute of the bubble's clock.
func awaitErr(t *testing.T, c <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: nothing within a minute", what)
		return nil
	}
}

// A newcomer never leads ahead of a live queued candidate, also once the
// term that candidate queued behind ran out with nobody to hand it on:
// the term's key outlives it while a candidate is queued, so that the
// fast path's SET NX fails and the script puts the newcomer behind.
// TryCampaign fails, and Campaign leads after the candidate.
func TestNewcomerWaitsAfterTermRanOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "ranout"
		leader := election.New(fake.FakeBackend(t, srv), name, election.WithLease(time.Second), election.WithLogger(nil))
		if _, err := leader.Campaign(ctx, "leader"); err != nil { // never resigned: the term runs out
			t.Fatal(err)
		}
		// The candidate's next attempt, due when the term runs out, is
		// held up: the election is free with a live candidate queued.
		cb := fake.NewGated(t, fake.FakeBackend(t, srv))
		c := election.New(cb, name, election.WithLogger(nil))
		var o terms
		cGot := o.leadAndRecord(ctx, c, "candidate")
		synctest.Wait()
		cb.HoldEvals()
		time.Sleep(1100 * time.Millisecond)
		n := election.New(fake.FakeBackend(t, srv), name, election.WithLogger(nil))
		if term, ok, err := n.TryCampaign(ctx, "newcomer"); ok || err != nil {
			if ok {
				_ = term.Resign(ctx)
			}
			t.Fatalf("a newcomer's TryCampaign after the term ran out = %v, %v; want false: a live candidate is queued", ok, err)
		}
		nGot := o.leadAndRecord(ctx, n, "newcomer")
		synctest.Wait()
		cb.OpenEvals()
		for _, g := range []<-chan error{cGot, nGot} {
			if err := awaitErr(t, g, "a campaign"); err != nil {
				t.Fatal(err)
			}
		}
		if got := o.order(); len(got) != 2 || got[0] != "candidate" {
			t.Errorf("led in the order %v; want the queued candidate first", got)
		}
	})
}
