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

// scriptOnly hides every optional extension of the backend it wraps
// (Setter, SetPublisher, Batcher): a campaign then takes the term inside
// the acquire script's fast path.
type scriptOnly struct{ backend.Backend }

// A term taken by a plain campaign reports, once read, when it began:
// the campaign's time, not the time of the read that converted it.
func TestPlainTermBeganIsTheCampaignsTime(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, opt := range []election.Option{election.WithWatchdog(6 * time.Second), election.WithLease(6 * time.Second)} {
				e := election.New(srv.NewBackend(t), "began", election.WithPrefix(prefix()), opt)
				before := time.Now()
				term, err := e.Campaign(ctx, "v")
				if err != nil {
					t.Fatal(err)
				}
				after := time.Now()
				time.Sleep(700 * time.Millisecond)
				l, err := e.Leader(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if l.Began.Before(before.Add(-50*time.Millisecond)) || l.Began.After(after.Add(50*time.Millisecond)) {
					t.Errorf("Began %v; want within the campaign [%v, %v]", l.Began, before, after)
				}
				if err := term.Resign(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A candidate's value goes into the plain term as it is, whatever it
// holds, and reads report it so, on both the SetPublisher path and the
// script's fast path.
func TestPlainTermValuesAsTheyAre(t *testing.T) {
	values := []string{"", " ", "=", "a b=c", "x\n=y\r\n", "1 2 3 =4", "\x00z", "term"}
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, b := range []backend.Backend{srv.NewBackend(t), scriptOnly{srv.NewBackend(t)}} {
				p := prefix()
				e := election.New(b, "values", election.WithPrefix(p))
				var last int64
				for _, v := range values {
					term, err := e.Campaign(ctx, v)
					if err != nil {
						t.Fatal(err)
					}
					l, err := e.Leader(ctx)
					if err != nil || l.Value != v {
						t.Errorf("%T: Leader = %+v, %v; want value %q", b, l, err, v)
					}
					tok := mustToken(t, term)
					if tok != l.Token || tok <= last {
						t.Errorf("%T: token %d, Leader's %d, last %d", b, tok, l.Token, last)
					}
					last = tok
					if err := term.Resign(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// A term resigned before anything read it draws no token: its Token
// fails after, and the next term's token follows the last one drawn.
func TestUnreadTermsDrawNoToken(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			e := election.New(srv.NewBackend(t), "unread", election.WithPrefix(prefix()))
			a, err := e.Campaign(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			ta := mustToken(t, a)
			if err := a.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				b, err := e.Campaign(ctx, "b")
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := b.Token(ctx); !errors.Is(err, dsync.ErrNotHeld) {
					t.Errorf("Token of a term resigned unread: %v; want ErrNotHeld", err)
				}
			}
			c, err := e.Campaign(ctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			if tc := mustToken(t, c); tc != ta+1 {
				t.Errorf("token %d after %d and unread terms; want %d", tc, ta, ta+1)
			}
			if err := c.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
