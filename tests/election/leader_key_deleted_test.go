package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
)

// Resign with nobody queued deletes the term's key: the last token lives
// on in the leader state alone. When that too is deleted behind the
// election's back, the next term's token is seeded from the server clock,
// and is still above every earlier term's.
func TestTokenAboveAfterLeaderKeyDeleted(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			k := p + ":election:{deleted-leader}"
			b := srv.NewBackend(t)
			e := election.New(b, "deleted-leader", election.WithPrefix(p))
			var last int64
			for i := range 3 {
				term, err := e.Campaign(ctx, "a")
				if err != nil {
					t.Fatal(err)
				}
				if mustToken(t, term) <= last {
					t.Fatalf("term %d: token %d; want above the last term's %d", i, mustToken(t, term), last)
				}
				last = mustToken(t, term)
				if err := term.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				if st, err := e.State(ctx); err != nil || st.LastToken != last {
					t.Fatalf("State after Resign = %+v, %v; want the last token %d", st, err, last)
				}
				if _, err := b.Eval(ctx, delKeys, []string{k, k + ":leader"}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// hsetLeader writes the leader state at KEYS[1] as versions before the
// string wrote it: a hash of rev, id, token, began and value.
var hsetLeader = backend.NewScript(`redis.call('HSET', KEYS[1], 'rev', ARGV[1], 'id', '', 'token', ARGV[2], 'began', '0', 'value', '')
return redis.call('PEXPIRE', KEYS[1], 60000)`)

// A leader state left as a hash by an earlier version is read, its rev and
// token carried on, and replaced by the next write.
func TestLeaderHashOfEarlierVersionCarriedOn(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			k := p + ":election:{old}"
			b := srv.NewBackend(t)
			const token = 4000000000000000
			if _, err := b.Eval(ctx, hsetLeader, []string{k + ":leader"}, "4000000000000007", token); err != nil {
				t.Fatal(err)
			}
			e := election.New(b, "old", election.WithPrefix(p))
			if st, err := e.State(ctx); err != nil || st.LastToken != token {
				t.Fatalf("State over the earlier version's hash = %+v, %v; want the last token %d", st, err, token)
			}
			term, err := e.Campaign(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if mustToken(t, term) != token+1 {
				t.Errorf("token %d; want %d, after the earlier version's", mustToken(t, term), token+1)
			}
			if l, err := e.Leader(ctx); err != nil || l.Value != "a" || l.Token != token+1 {
				t.Errorf("Leader = %+v, %v; want a with token %d", l, err, token+1)
			}
			if err := term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
