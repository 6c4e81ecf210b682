package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/wait"
)

// CampaignDeniedPublish fails t unless an election's campaign through a
// user that may write its keys but not publish on its observe channel
// fails at once with the server's refusal (an error wrapping a
// *backend.ServerError) and leaves nothing on n: no term for a lease that
// nobody resigns, no key at all. Campaign and TryCampaign are tried through
// the backends open makes for the user, and through the same backends
// with their optional extensions hidden, whose campaigns are the acquire
// script's, under two ACLs set on n: the observe channel left out of the
// user's channels, and PUBLISH denied. open returns a backend that
// authenticates as user with password, closed when t ends.
func CampaignDeniedPublish(t *testing.T, n *Node, open func(t *testing.T, user, password string) backend.Backend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const password = "denied-publish"
	for i, acl := range []struct {
		name  string
		rules func(prefix string) []any
	}{
		{"observe channel left out", func(p string) []any {
			return []any{"~*", "resetchannels", "&" + p + ":election:*:wake*", "+@all"}
		}},
		{"PUBLISH denied", func(string) []any { return []any{"~*", "allchannels", "+@all", "-publish"} }},
	} {
		for _, path := range []string{"SetPublisher", "script"} {
			for _, try := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/try=%v", acl.name, path, try)
				t.Run(name, func(t *testing.T) {
					p := fmt.Sprintf("denied%d:%s", i, dsync.NewID()[:8])
					user := "denied-" + dsync.NewID()[:8]
					args := append([]any{"SETUSER", user, "reset", "on", ">" + password}, acl.rules(p)...)
					if _, err := n.Do(ctx, "ACL", args...); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { n.Do(context.Background(), "ACL", "DELUSER", user) })
					b := open(t, user, password)
					if _, ok := b.(backend.SetPublisher); path == "SetPublisher" && !ok {
						t.Skipf("%T does not implement backend.SetPublisher", b)
					}
					if path == "script" {
						b = extensionsHidden{b}
					}
					e := election.New(b, "denied", election.WithPrefix(p))
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					start := time.Now()
					var term *election.Term
					var err error
					if try {
						term, _, err = e.TryCampaign(cctx, "v")
					} else {
						term, err = e.Campaign(cctx, "v")
					}
					took := time.Since(start)
					// The clean-up of a failed campaign may outlive it by
					// a little (see wait.Cleanup).
					wait.Settle()
					left, kerr := redis.Strings(n.Do(ctx, "KEYS", p+":*"))
					if kerr != nil {
						t.Fatal(kerr)
					}
					if term != nil {
						defer term.Resign(context.Background())
						t.Errorf("campaign through a user that may not publish on the observe channel led (keys %q); want an error", left)
						return
					}
					var se *backend.ServerError
					if !errors.As(err, &se) || cctx.Err() != nil || took > 2*time.Second {
						t.Errorf("campaign through a user that may not publish on the observe channel: %v after %v; want the server's refusal at once", err, took)
					}
					t.Logf("%v, after %v", err, took)
					if len(left) != 0 {
						t.Errorf("a campaign that failed (%v) left %q on the server", err, left)
					}
				})
			}
		}
	}
}

// extensionsHidden hides every optional extension of the backend it wraps
// (Setter, SetPublisher, Batcher): an election's campaign then takes the
// term in the acquire script.
type extensionsHidden struct{ backend.Backend }
