package election_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/election"
)

// An observer whose reads the server refuses logs the refusal once, not at
// every retry, and logs when it observes again: an operator who saw the
// warning can tell a failure that goes on from one that passed.
func TestObserverLogsARefusalOnceAndItsEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := observeRefused(t, ctx)
	// Let it retry a few times, counted from before it observed.
	o.awaitRefusals(t, ctx, 4, "the observer's retries of its refused read")
	tok := mustToken(t, o.term) // converts the term: the next read passes
	expectLeader(t, o.observed, "v", tok, 5*time.Second, "the observer, once the term was read")
	logs := o.logs
	recs := logs.await(t, "the end of the refusals", 5*time.Second, func(recs []string) bool {
		return strings.Contains(recs[len(recs)-1], "observing the election again")
	})
	if len(recs) != 2 || !strings.HasPrefix(recs[0], "WARN dsync: the server refused a call to observe the election") ||
		!strings.Contains(recs[0], "attempts=1") || !strings.HasPrefix(recs[1], "INFO") {
		t.Fatalf("logged:%s\nwant one warning of the refusal, at its first attempt, then that it observes again", logs)
	}
}

// refusedObserver is an election whose term nothing has read yet, and an
// observer of it through a user that may not write: its reads of the term
// are refused until something that may write converts it (see
// TestUnreadTermReadsThroughReadOnlyUser).
type refusedObserver struct {
	srv      *harness.Server
	user     string
	prefix   string
	term     *election.Term
	observed <-chan election.Leader
	logs     *records // the observer's log
	refused0 int      // the server's error replies before it observed
}

// observeRefused starts a refusedObserver and returns once the observer
// logged its first refusal.
func observeRefused(t *testing.T, ctx context.Context) *refusedObserver {
	t.Helper()
	o := &refusedObserver{srv: harness.Standalone(t), user: "ro-" + dsync.NewID()[:8], prefix: prefix(),
		logs: &records{added: make(chan struct{}, 1)}}
	const password = "read-only"
	if _, err := o.srv.Node().Do(ctx, "ACL", "SETUSER", o.user, "reset", "on", ">"+password, "~*", "&*", "+@all", "-@write"); err != nil {
		t.Fatal(err)
	}
	w := election.New(userBackend(t, o.srv.Addr(), "default", ""), "log", election.WithPrefix(o.prefix))
	r := election.New(userBackend(t, o.srv.Addr(), o.user, password), "log", election.WithPrefix(o.prefix),
		election.WithLogger(slog.New(o.logs)))
	term, err := w.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	o.term = term
	t.Cleanup(func() { term.Resign(context.Background()) })
	o.refused0 = refusals(t, ctx, o.srv)
	octx, ocancel := context.WithCancel(ctx)
	t.Cleanup(ocancel)
	o.observed = r.Observe(octx) // its read of the unread term is refused
	o.logs.await(t, "the first refusal", 5*time.Second, func(recs []string) bool { return len(recs) > 0 })
	return o
}

// awaitRefusals waits until the server replied with n more errors than
// refused0, as each of the observer's refused reads makes it.
func (o *refusedObserver) awaitRefusals(t *testing.T, ctx context.Context, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; refusals(t, ctx, o.srv) < o.refused0+n; i++ {
		if i == 1000 || time.Now().After(deadline) {
			t.Fatalf("%s: not refused %d times within 10s (logged:%s)", what, n, o.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// refusals returns how many errors the server replied with so far.
func refusals(t *testing.T, ctx context.Context, srv *harness.Server) int {
	t.Helper()
	v, err := srv.Node().Do(ctx, "INFO", "errorstats")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := v.([]byte)
	n := 0
	for _, line := range strings.Split(string(text), "\n") {
		if _, count, ok := strings.Cut(line, ":count="); ok && strings.HasPrefix(line, "errorstat_") {
			c, _ := strconv.Atoi(strings.TrimSpace(count))
			n += c
		}
	}
	return n
}

// records is a slog.Handler that keeps each record as its level, message
// and attributes in a line.
type records struct {
	mu    sync.Mutex
	lines []string
	added chan struct{} // receives after a record is added
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, b.String())
	h.mu.Unlock()
	select {
	case h.added <- struct{}{}:
	default:
	}
	return nil
}

func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

func (h *records) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return "\n\t" + strings.Join(h.lines, "\n\t")
}

// await returns the records once done reports true of them, or fails t
// after d.
func (h *records) await(t *testing.T, what string, d time.Duration, done func([]string) bool) []string {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		h.mu.Lock()
		recs := append([]string(nil), h.lines...)
		h.mu.Unlock()
		if len(recs) > 0 && done(recs) {
			return recs
		}
		select {
		case <-h.added:
		case <-timer.C:
			t.Fatalf("%s: not logged within %v (logged:%s)", what, d, h)
		}
	}
}

// A refusal that goes on is logged again when its cause changes: here the
// user's password changes under the observer, whose connections are
// killed, so that its retries fail to authenticate.
func TestObserverLogsAChangedCause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := observeRefused(t, ctx)
	srv, user, logs := o.srv, o.user, o.logs
	if _, err := srv.Node().Do(ctx, "ACL", "SETUSER", user, "resetpass", ">another"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Node().Do(ctx, "CLIENT", "KILL", "USER", user); err != nil {
		t.Fatal(err)
	}
	recs := logs.await(t, "the new cause", 5*time.Second, func(recs []string) bool {
		return strings.Contains(recs[len(recs)-1], "WRONGPASS")
	})
	// The refusal, perhaps the killed connection, then the failed logins:
	// each cause once, however many retries.
	for _, rec := range recs {
		if !strings.HasPrefix(rec, "WARN") {
			t.Fatalf("logged:%s\nwant warnings only", logs)
		}
	}
	if len(recs) > 3 {
		t.Fatalf("logged:%s\nwant each cause once", logs)
	}
}

// A server that stops answering fails each of the observer's retries with
// the same cause, an i/o timeout, whose text names the retry's own
// connection (read tcp 127.0.0.1:<port>->...): a new port each time, as a
// timed-out connection is not reused. That is one cause, logged once, not
// a warning at every retry.
func TestObserverLogsAStalledServerOnce(t *testing.T) {
	const pause = 2 * time.Second
	srv := harness.Standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs := &records{added: make(chan struct{}, 1)}
	p := prefix()
	w := election.New(userBackend(t, srv.Addr(), "default", ""), "stall", election.WithPrefix(p),
		election.WithWatchdog(300*time.Millisecond), election.WithLogger(nil))
	pool := &redis.Pool{MaxIdle: 4, DialContext: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, "tcp", srv.Addr())
	}}
	// A short timeout, so that the retries fail fast: their pace is the
	// backoff's, as it is against a server that refuses connections.
	b := bredigo.New(pool, bredigo.WithTimeout(100*time.Millisecond))
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	r := election.New(b, "stall", election.WithPrefix(p), election.WithLogger(slog.New(logs)))
	term, err := w.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	observed := r.Observe(octx)
	receive(t, observed, 5*time.Second, "the observer's first state")

	// The observer reads the state again when the term's lease, 300ms at
	// most, runs out: within the pause, which its retries then meet.
	if _, err := srv.Node().Do(ctx, "DEBUG", "SLEEP", pause.Seconds()); err != nil {
		t.Fatal(err)
	}
	recs := logs.await(t, "the end of the stall", 5*time.Second, func(recs []string) bool {
		return strings.Contains(recs[len(recs)-1], "observing the election again")
	})
	warnings := 0
	for _, rec := range recs {
		if strings.HasPrefix(rec, "WARN") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("logged:%s\nwant one warning of the stalled server, then that it observes again", logs)
	}
}

// A failure the observer does not retry (a foreign key) ends the run of
// failures it interrupts: the refusal that comes back afterwards is logged
// again, however it reads like the one logged before.
func TestObserverLogsARefusalAgainAfterAnotherFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := observeRefused(t, ctx)
	srv, user, p, logs := o.srv, o.user, o.prefix, o.logs

	// The term's lock key swapped for a foreign one, then put back.
	lock, saved := p+":election:{log}", p+":saved"
	if _, err := srv.Node().Do(ctx, "EVAL", "redis.call('RENAME', KEYS[1], KEYS[2]) return redis.call('HSET', KEYS[1], 'not', 'dsync')", 2, lock, saved); err != nil {
		t.Fatal(err)
	}
	logs.await(t, "the foreign key", 5*time.Second, func(recs []string) bool {
		return strings.Contains(recs[len(recs)-1], "cannot read the election's leader")
	})
	if _, err := srv.Node().Do(ctx, "RENAME", saved, lock); err != nil {
		t.Fatal(err)
	}
	// A gap, its pub/sub connection killed, has the observer read again:
	// refused again, as at first.
	o.refused0 = refusals(t, ctx, srv)
	if _, err := srv.Node().Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub", "USER", user); err != nil {
		t.Fatal(err)
	}
	o.awaitRefusals(t, ctx, 2, "the observer's read after the gap")
	tok := mustToken(t, o.term) // converts the term: the next read passes
	expectLeader(t, o.observed, "v", tok, 5*time.Second, "the observer, once the term was read")
	recs := logs.await(t, "the end of the refusals", 5*time.Second, func(recs []string) bool {
		return strings.HasPrefix(recs[len(recs)-1], "INFO")
	})
	refused := "WARN dsync: the server refused a call to observe the election"
	if len(recs) != 4 || !strings.HasPrefix(recs[0], refused) || !strings.Contains(recs[1], "cannot read the election's leader") ||
		!strings.HasPrefix(recs[2], refused) || !strings.Contains(recs[2], "attempts=1") {
		t.Fatalf("logged:%s\nwant the refusal, the foreign key, the refusal again, then that it observes again", logs)
	}
}
