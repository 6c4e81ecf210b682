package election_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// Every change is published once: a term taken by a plain campaign as the
// hint "term", which makes observers read it (its token's draw converts it
// without a word), and every other change by the script that makes it,
// numbered above the one before, across the leader state deleted behind
// the election's back, and the term's key deleted under a leader (a
// newcomer's plain campaign leads then, and the lost leader's Resign
// publishes nothing); every term's token is above the one before, and
// values keep their spaces and newlines.
func TestEveryChangePublishedOnceAcrossFastPathAndDeletedKeys(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := prefix()
	const name = "published"
	key := p + ":election:{" + name + "}"
	b := srv.NewBackend(t)
	sub, err := b.Subscribe(ctx, key+":observe")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	e := election.New(b, name, election.WithPrefix(p), election.WithLogger(nil))
	del := func(k string) {
		t.Helper()
		if n, err := srv.Do(ctx, "DEL", k); err != nil || n != int64(1) {
			t.Fatalf("DEL %s = %v, %v", k, n, err)
		}
	}
	var tokens []int64
	lead := func(value string) *election.Term {
		t.Helper()
		term, err := e.Campaign(ctx, value)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, mustToken(t, term))
		return term
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	a := lead("a")
	must(a.Resign(ctx))
	del(key + ":leader")
	bt := lead("b 1\n2 ")
	del(key)
	c, ok, err := e.TryCampaign(ctx, "")
	if err != nil || !ok {
		t.Fatalf("TryCampaign with the term's key deleted = %v, %v; want to lead", ok, err)
	}
	tokens = append(tokens, mustToken(t, c))
	must(c.Proclaim(ctx, "c\n"))
	must(c.Resign(ctx))
	if err := bt.Resign(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Resign of the term whose key was deleted: %v; want ErrNotHeld", err)
	}
	d := lead(" d")
	must(d.Resign(ctx))

	// term a, lapse, term b, term c, c's Proclaim, lapse, term d, lapse.
	const hint = "term"
	want := []struct {
		lapsed bool
		value  string
	}{{false, hint}, {true, ""}, {false, hint}, {false, hint}, {false, "c\n"}, {true, ""}, {false, hint}, {true, ""}}
	var lastRev int64
	for i, w := range want {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := sub.Receive(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if w.value == hint {
			if m.Payload != hint {
				t.Errorf("message %d: %q; want the hint %q", i, m.Payload, hint)
			}
			continue
		}
		f := strings.SplitN(m.Payload, " ", 6)
		if len(f) != 6 {
			t.Fatalf("message %d: %q", i, m.Payload)
		}
		rev, _ := strconv.ParseInt(f[0], 10, 64)
		if rev <= lastRev {
			t.Errorf("message %d %q: rev %d after %d; want it greater", i, m.Payload, rev, lastRev)
		}
		lastRev = rev
		if (f[1] == "1") != w.lapsed || f[5] != w.value {
			t.Errorf("message %d: %q; want lapsed %v, value %q", i, m.Payload, w.lapsed, w.value)
		}
	}
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	m, err := sub.Receive(rctx)
	rcancel()
	if err == nil {
		t.Errorf("a message more: %q", m.Payload)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("term %d's token %d after %d", i, tokens[i], tokens[i-1])
		}
	}
}
