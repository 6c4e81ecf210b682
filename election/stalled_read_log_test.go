package election_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

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
	defer election.SetCallTimeout(100 * time.Millisecond)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testserver.Real(t)
	p := "dsynctest:" + t.Name()
	leader := election.New(srv.NewBackend(t), "stalled-log", election.WithPrefix(p), election.WithLogger(nil))
	term, err := leader.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())

	sb := &stallingReads{Backend: srv.NewBackend(t)}
	sb.stalls.Store(3)
	log := &lines{}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	observed := election.New(sb, "stalled-log", election.WithPrefix(p), election.WithLogger(slog.New(log))).Observe(octx)
	select {
	case l := <-observed:
		if l.Value != "v" {
			t.Fatalf("observed %+v; want the leader with value v", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no leader observed 10s after three reads that timed out (%d reads)", sb.reads.Load())
	}
	// Both are logged before the state is sent.
	if got := log.get(); len(got) != 2 || !strings.HasPrefix(got[0], "WARN dsync: cannot reach the server to observe the election") ||
		!strings.HasPrefix(got[1], "INFO dsync: observing the election again") {
		t.Fatalf("logged %q; want one warning that the server cannot be reached, then that it observes again", got)
	}
}
