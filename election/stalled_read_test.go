package election_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
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

// observeThroughStalls starts a term with the value "v", then an observer
// of it, logging to logger, through a backend whose first stalls reads
// hang past the observer's bound of each call, bound. It fails t unless
// the observer hears of the leader within limit, and returns the backend.
func observeThroughStalls(t *testing.T, stalls int32, bound, limit time.Duration, logger *slog.Logger) *stallingReads {
	t.Helper()
	defer election.SetCallTimeout(bound)()
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
	sb.stalls.Store(stalls)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	observed := election.New(sb, "stalled-read", election.WithPrefix(p), election.WithLogger(logger)).Observe(octx)
	select {
	case l := <-observed:
		if l.Value != "v" {
			t.Fatalf("observed %+v; want the leader with value v", l)
		}
	case <-time.After(limit):
		t.Fatalf("no leader observed %v after %d reads that timed out (%d reads); want it read again", limit, stalls, sb.reads.Load())
	}
	return sb
}

// An observer whose read times out on a stalled server reads again once
// it answers: a read that ran past the observer's own bound is a failure
// to reach the server, as a broken connection is, and not one to give up
// on until the next change, which may never come.
func TestObserverRetriesAReadPastItsTimeout(t *testing.T) {
	sb := observeThroughStalls(t, 1, 200*time.Millisecond, 5*time.Second, nil)
	if n := sb.reads.Load(); n < 2 {
		t.Fatalf("%d reads; want the timed-out one and another", n)
	}
}

// lines is a slog.Handler that keeps each record as its level and message.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (h *lines) Enabled(context.Context, slog.Level) bool { return true }
func (h *lines) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.all = append(h.all, r.Level.String()+" "+r.Message)
	return nil
}
func (h *lines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lines) WithGroup(string) slog.Handler      { return h }

func (h *lines) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.all...)
}

// An observer whose reads time out a few times in a row logs that it
// cannot reach the server once, not at every retry, and that it observes
// again once a read passes: as for a broken connection, and not that it
// cannot read the leader, which would say it gave up.
func TestObserverLogsStalledReadsOnceAndTheirEnd(t *testing.T) {
	log := &lines{}
	observeThroughStalls(t, 3, 100*time.Millisecond, 10*time.Second, slog.New(log))
	// Both are logged before the state is sent.
	if got := log.get(); len(got) != 2 || !strings.HasPrefix(got[0], "WARN dsync: cannot reach the server to observe the election") ||
		!strings.HasPrefix(got[1], "INFO dsync: observing the election again") {
		t.Fatalf("logged %q; want one warning that the server cannot be reached, then that it observes again", got)
	}
}
