package election_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestHandOffExpiredBeforeWakeUpIsNotTaken: leader A resigns, handing the
// term to the head candidate W on a 1s lease, but W's wake-up is held up
// (a server pause, a congested pub/sub path) past that lease. W's
// heartbeat attempt then finds no term on and X at the head of the queue:
// it queues W again and replies without a token ({0, -1, '0'}). When the
// late wake-up arrives, W must not take the term it carries, which
// expired before W's last attempt: X, next in turn, leads, and W waits
// until X resigns, then leads with a newer token. Nothing is left behind
// W's return: no phantom term of a queued entry of W's blocks the
// election after W resigns.
func TestHandOffExpiredBeforeWakeUpIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "handoffexpired"
		open := func(g *fake.Gated, opts ...election.Option) *election.Election {
			opts = append(opts, election.WithLogger(nil))
			if g != nil {
				return election.New(g, name, opts...)
			}
			return election.New(fake.FakeBackend(t, srv), name, opts...)
		}
		queued := func(e *election.Election, value string) <-chan campaignResult {
			t.Helper()
			c := campaign(ctx, e, value)
			synctest.Wait()
			select {
			case r := <-c:
				t.Fatalf("%s's Campaign returned at once: %v", value, r.err)
			default:
			}
			return c
		}
		a := open(nil)
		// W's hand-off lease (1s) is shorter than its heartbeat (5s/3):
		// its next attempt after the hand-off comes once the term has
		// expired.
		wb := fake.NewGated(t, fake.FakeBackend(t, srv))
		w := open(wb, election.WithWatchdog(time.Second))
		xb := fake.NewGated(t, fake.FakeBackend(t, srv))
		x := open(xb)
		probe := open(nil)

		aTerm, err := a.Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		aToken := mustToken(t, aTerm) // while the term is on (see Term.Token)
		wGot := queued(w, "w")        // at the head
		xGot := queued(x, "x")        // behind W
		xb.HoldEvals()                // X cannot lead before W's retry
		wb.HoldDeliveries()           // W's wake-up is held up
		if err := aTerm.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		handed, err := probe.State(ctx)
		if err != nil || handed.Owner == "" || handed.LastToken <= aToken || handed.TTL > time.Second {
			t.Fatalf("state after A's resignation = %+v, %v; want W's term, token above %d, on a 1s lease", handed, err, aToken)
		}

		// W's heartbeat at 1.67s finds no term, X at the head: W is
		// queued again, and told no token.
		time.Sleep(1700 * time.Millisecond)
		synctest.Wait()
		if st, err := probe.State(ctx); err != nil || st.Owner != "" || st.Queued != 2 {
			t.Fatalf("state after W's retry = %+v, %v; want no term, X and W queued", st, err)
		}
		wb.OpenDeliveries() // the stale wake-up reaches W
		synctest.Wait()
		xb.OpenEvals() // X's attempt: its turn
		xr := <-xGot
		if xr.err != nil {
			t.Fatalf("X: %v", xr.err)
		}
		if mustToken(t, xr.term) <= handed.LastToken {
			t.Fatalf("X's token = %d; want above the expired hand-off's %d", mustToken(t, xr.term), handed.LastToken)
		}
		synctest.Wait()
		var wr campaignResult
		wReturned := false
		select {
		case wr = <-wGot:
			wReturned = true
			if wr.err == nil {
				t.Errorf("W's Campaign returned a term (token %d) while X leads (token %d): W took the hand-off of token %d, which expired before W's last attempt",
					mustToken(t, wr.term), mustToken(t, xr.term), handed.LastToken)
			} else {
				t.Errorf("W's Campaign failed: %v", wr.err)
			}
		default:
		}

		// W keeps waiting while X leads, through a heartbeat.
		time.Sleep(2 * time.Second)
		if !wReturned {
			select {
			case wr = <-wGot:
				wReturned = true
				t.Errorf("W's Campaign returned %v while X leads", wr.err)
			default:
			}
		}
		if err := xr.term.Resign(ctx); err != nil {
			t.Fatalf("X's resignation: %v", err)
		}
		if !wReturned {
			wr = <-wGot
			if wr.err != nil {
				t.Fatalf("W after X's resignation: %v", wr.err)
			}
			if mustToken(t, wr.term) <= mustToken(t, xr.term) {
				t.Errorf("W's token = %d; want above X's %d", mustToken(t, wr.term), mustToken(t, xr.term))
			}
			if st, err := probe.State(ctx); err != nil || st.Leader.Value != "w" || st.LastToken != mustToken(t, wr.term) || st.Queued != 0 {
				t.Errorf("state while W leads = %+v, %v; want W's term (token %d), nobody queued", st, err, mustToken(t, wr.term))
			}
			select {
			case <-wr.term.Done():
				t.Error("W's term is over as it begins")
			default:
			}
		}
		// W's resignation leaves no term on, nobody queued: the next
		// candidate leads at once.
		if wr.term != nil {
			if err := wr.term.Resign(ctx); err != nil {
				t.Logf("W's resignation: %v", err)
			}
		}
		if st, err := probe.State(ctx); err != nil || st.Owner != "" || st.Queued != 0 {
			t.Errorf("state after W's resignation = %+v, %v; want no term, nobody queued", st, err)
		}
		if term, ok, err := probe.TryCampaign(ctx, "probe"); err != nil || !ok {
			t.Errorf("TryCampaign after W's resignation = %v, %v; want to lead", ok, err)
		} else {
			term.Resign(ctx)
		}
		time.Sleep(time.Minute)
	})
}
