package election_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/election"
)

// Reads of a term that nothing read yet convert it (see Keys in the
// package doc): through a user that may read but not write, Leader and
// State fail at once with the server's refusal, never a wrong answer, and
// succeed once the leader's Token has converted the term; an observer
// through that user sees the term then. A user limited to +@read may not
// run the reads' scripts at all: every read fails so, whatever the term.
func TestUnreadTermReadsThroughReadOnlyUser(t *testing.T) {
	srv := harness.Standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const password = "read-only"
	for _, acl := range []string{"+@all -@write", "+@read"} {
		t.Run(acl, func(t *testing.T) {
			user := "ro-" + dsync.NewID()[:8]
			args := []any{"SETUSER", user, "reset", "on", ">" + password, "~*", "&*"}
			for _, r := range strings.Fields(acl) {
				args = append(args, r)
			}
			if _, err := srv.Node().Do(ctx, "ACL", args...); err != nil {
				t.Fatal(err)
			}
			p := prefix()
			w := election.New(userBackend(t, srv.Addr(), "default", ""), "ro", election.WithPrefix(p))
			r := election.New(userBackend(t, srv.Addr(), user, password), "ro", election.WithPrefix(p), election.WithLogger(nil))
			scripts := acl != "+@read"
			if scripts {
				if _, err := r.Leader(ctx); !errors.Is(err, dsync.ErrNoLeader) {
					t.Fatalf("Leader through a read-only user, no term on: %v; want ErrNoLeader", err)
				}
			}
			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			observed := r.Observe(octx)
			term, err := w.Campaign(ctx, "v")
			if err != nil {
				t.Fatal(err)
			}
			defer term.Resign(ctx)
			refusedReads(t, ctx, r, "a read-only user")
			tok := mustToken(t, term) // converts the term
			if !scripts {
				refusedReads(t, ctx, r, "a user limited to +@read")
				return
			}
			if l, err := r.Leader(ctx); err != nil || l.Value != "v" || l.Token != tok {
				t.Errorf("Leader through a read-only user, the term read: %+v, %v; want v with token %d", l, err, tok)
			}
			expectLeader(t, observed, "v", tok, 5*time.Second, "an observer through a read-only user")
		})
	}
}

// Reads on a replica of a term that nothing read yet fail at once with
// the replica's refusal to write (READONLY), never a wrong answer, and
// succeed once the term was converted on the primary and replicated; an
// observer on the replica sees the term then.
func TestUnreadTermReadsOnAReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary := harness.Standalone(t)
	// A replica that syncs at once (diskless, without the default wait).
	if _, err := primary.Node().Do(ctx, "CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		t.Fatal(err)
	}
	replica, err := harness.StartServer(ctx, "--replicaof", "127.0.0.1", primary.Node().Port())
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	p := prefix()
	key := p + ":election:{replica}"
	awaitReplica(t, ctx, replica.Node(), func(replica *harness.Node) (bool, error) {
		v, err := redis.String(replica.Do(ctx, "INFO", "replication"))
		return strings.Contains(v, "master_link_status:up"), err
	}, "the replica's link to its primary")
	w := election.New(userBackend(t, primary.Addr(), "default", ""), "replica", election.WithPrefix(p))
	r := election.New(userBackend(t, replica.Addr(), "default", ""), "replica", election.WithPrefix(p), election.WithLogger(nil))
	if _, err := r.Leader(ctx); !errors.Is(err, dsync.ErrNoLeader) {
		t.Fatalf("Leader on the replica, no term on: %v; want ErrNoLeader", err)
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	observed := r.Observe(octx)
	term, err := w.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)
	awaitReplica(t, ctx, replica.Node(), func(replica *harness.Node) (bool, error) {
		n, err := redis.Int(replica.Do(ctx, "EXISTS", key))
		return n == 1, err
	}, "the term on the replica")
	refusedReads(t, ctx, r, "the replica")
	tok := mustToken(t, term) // converts the term on the primary
	expectLeader(t, observed, "v", tok, 5*time.Second, "an observer on the replica")
	if l, err := r.Leader(ctx); err != nil || l.Value != "v" || l.Token != tok {
		t.Errorf("Leader on the replica, the term read and replicated: %+v, %v; want v with token %d", l, err, tok)
	}
}

// refusedReads fails t unless Leader and State through r fail at once with
// the server's refusal (an error wrapping a *backend.ServerError, naming
// the operation), neither ErrNoLeader nor ErrUnexpectedReply.
func refusedReads(t *testing.T, ctx context.Context, r *election.Election, through string) {
	t.Helper()
	for op, read := range map[string]func(ctx context.Context) error{
		"leader": func(ctx context.Context) error { _, err := r.Leader(ctx); return err },
		"state":  func(ctx context.Context) error { _, err := r.State(ctx); return err },
	} {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		err := read(rctx)
		took := time.Since(start)
		cancel()
		var se *backend.ServerError
		if !errors.As(err, &se) || errors.Is(err, dsync.ErrNoLeader) || errors.Is(err, dsync.ErrUnexpectedReply) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%s: ", op)) || took > 2*time.Second {
			t.Errorf("%s through %s of an unread term: %v after %v; want the server's refusal at once", op, through, err, took)
		}
	}
}

// expectLeader fails t unless the observer's channel yields the leader
// with value and token within d, whatever it yields before.
func expectLeader(t *testing.T, c <-chan election.Leader, value string, token int64, d time.Duration, who string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var last []election.Leader
	for range 100 {
		select {
		case l, ok := <-c:
			if !ok {
				t.Fatalf("%s: channel closed; received %+v", who, last)
			}
			if l.Value == value && l.Token == token {
				return
			}
			last = append(last, l)
		case <-timer.C:
			t.Fatalf("%s: the leader %q with token %d not received within %v, once the term was read; received %+v", who, value, token, d, last)
		}
	}
	t.Fatalf("%s: 100 states received, none the leader %q with token %d", who, value, token)
}

// awaitReplica polls cond on replica, every 10ms for up to 10s.
func awaitReplica(t *testing.T, ctx context.Context, replica *harness.Node, cond func(*harness.Node) (bool, error), what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		ok, err := cond(replica)
		if ok {
			return
		}
		if time.Now().After(deadline) || i > 1000 {
			t.Fatalf("%s: not within 10s (last error: %v)", what, err)
		}
		time.Sleep(10 * time.Millisecond) // replication is asynchronous, with no event to wait on
	}
}
