package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
)

// setForeign writes ARGV[1] at KEYS[1], without an expiry.
var setForeign = backend.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)

// foreignState reads KEYS[1] and its PTTL.
var foreignState = backend.NewScript(`return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}`)

// A leader state that dsync did not write is left alone (see the package
// doc, Errors): a plain campaign takes the term over it, and the term's
// renewals, which cannot convert the term, must not give the foreign key
// an expiry, after which the server would delete it.
func TestForeignLeaderStateLeftAloneByRenewals(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			leader := p + ":election:{foreign-leader}:leader"
			b := srv.NewBackend(t)
			if _, err := b.Eval(ctx, setForeign, []string{leader}, "not dsync's"); err != nil {
				t.Fatal(err)
			}
			e := election.New(b, "foreign-leader", election.WithPrefix(p), election.WithWatchdog(300*time.Millisecond), election.WithLogger(nil))
			term, err := e.Campaign(ctx, "v")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := term.Token(ctx); !errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("Token over a foreign leader state: %v; want ErrUnexpectedReply", err)
			}
			time.Sleep(400 * time.Millisecond) // a few renewals (every 100ms)
			v, err := b.Eval(ctx, foreignState, []string{leader})
			if err != nil {
				t.Fatal(err)
			}
			r, _ := v.([]any)
			if len(r) != 2 || r[0] != "not dsync's" || r[1] != int64(-1) {
				t.Errorf("foreign leader key after the term's renewals: %v; want it as written, with no expiry (PTTL -1)", v)
			}
			if err := term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			// Once renewals stop, an expiry they set deletes the key.
			time.Sleep(400 * time.Millisecond)
			if v, err := b.Eval(ctx, foreignState, []string{leader}); err != nil {
				t.Fatal(err)
			} else if r, _ := v.([]any); len(r) != 2 || r[0] != "not dsync's" {
				t.Errorf("foreign leader key after Resign: %v; want it as written", v)
			}
		})
	}
}
