package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/observe"
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
			// The renewals are counted as they come, so that the check
			// waits for them, not for a time they may overrun on a busy
			// machine: a watchdog of 1.5s renews every 500ms, and loses
			// the term only to a renewal a second late.
			renewed := make(chan struct{}, 16)
			observe.Set(b, &observe.Observer{Renewed: func(r observe.Renewal) {
				if !r.Failed {
					select {
					case renewed <- struct{}{}:
					default:
					}
				}
			}})
			defer observe.Set(b, nil)
			e := election.New(b, "foreign-leader", election.WithPrefix(p), election.WithWatchdog(1500*time.Millisecond), election.WithLogger(nil))
			term, err := e.Campaign(ctx, "v")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := term.Token(ctx); !errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("Token over a foreign leader state: %v; want ErrUnexpectedReply", err)
			}
			for i := range 2 {
				select {
				case <-renewed:
				case <-term.Done():
					t.Fatalf("the term ended after %d renewals", i)
				case <-ctx.Done():
					t.Fatalf("%d renewals in a minute; want 2", i)
				}
			}
			// An expiry that a renewal set would show as a PTTL (and, once
			// renewals stop, delete the key).
			want := func(when string) {
				t.Helper()
				v, err := b.Eval(ctx, foreignState, []string{leader})
				if err != nil {
					t.Fatal(err)
				}
				if r, _ := v.([]any); len(r) != 2 || r[0] != "not dsync's" || r[1] != int64(-1) {
					t.Errorf("foreign leader key %s: %v; want it as written, with no expiry (PTTL -1)", when, v)
				}
			}
			want("after the term's renewals")
			if err := term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			want("after Resign")
		})
	}
}

// lostSetPublish takes the term through the backend's SetNXPublish and
// loses its reply: the caller waits until its ctx ends, as one whose
// connection stalled (ctx always has a deadline here).
type lostSetPublish struct{ backend.Backend }

func (l lostSetPublish) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return l.Backend.(backend.Setter).SetNX(ctx, key, value, ttl)
}

func (l lostSetPublish) SetNXPublish(ctx context.Context, key, value string, ttl time.Duration, channel, message string) (bool, error) {
	if _, err := l.Backend.(backend.SetPublisher).SetNXPublish(ctx, key, value, ttl, channel, message); err != nil {
		return false, err
	}
	// dsync's attempt contexts may have a deadline and no Done.
	dl, _ := ctx.Deadline()
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(dl)):
	}
	return false, context.DeadlineExceeded
}

// A campaign whose plain SET took the term but whose ctx ended before the
// reply undoes the term as it gives up, even over a leader state that
// dsync did not write, which it leaves alone: nothing read the term, so
// nothing else knows of it, and a term left there would hold the election
// up for its lease.
func TestAbandonedPlainCampaignUndoesItsTerm(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := prefix()
			key := p + ":election:{abandoned}"
			b := srv.NewBackend(t)
			if _, err := b.Eval(ctx, setForeign, []string{key + ":leader"}, "not dsync's"); err != nil {
				t.Fatal(err)
			}
			e := election.New(lostSetPublish{b}, "abandoned", election.WithPrefix(p), election.WithLogger(nil))
			cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := e.Campaign(cctx, "v")
			ccancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Campaign whose reply was lost: %v; want context.DeadlineExceeded", err)
			}
			for _, k := range []string{key, key + ":leader"} {
				r, err := b.Eval(ctx, foreignState, []string{k})
				if err != nil {
					t.Fatal(err)
				}
				got, _ := r.([]any)
				want := []any{nil, int64(-2)} // the term: gone
				if k != key {
					want = []any{"not dsync's", int64(-1)}
				}
				if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
					t.Errorf("%s after the abandoned campaign: %v; want %v", k, got, want)
				}
			}
		})
	}
}
