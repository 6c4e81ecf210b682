package waitgroup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// TestForeignHashIsUnexpectedReply: a hash at the group's key that dsync
// did not write is reported by Add, Wait and State as
// dsync.ErrUnexpectedReply, at once and without a write, even when it has
// a field called "gen" as the group's own state does; never as a Lua
// runtime error.
func TestForeignHashIsUnexpectedReply(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, fields := range [][]any{
		{"gen", "x"},
		{"gen", "1"},
		{"n", "x", "gen", "1"},
		{"n", "1", "gen", "x"},
		{"other", "1"},
	} {
		p := prefix()
		key := p + ":waitgroup:{g}"
		if _, err := srv.Do(ctx, "HSET", append([]any{key}, fields...)...); err != nil {
			t.Fatal(err)
		}
		g := open(srv.NewBackend(t), p)
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		err := g.Wait(wctx)
		wcancel()
		if !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("%v: Wait: %v, want ErrUnexpectedReply", fields, err)
		}
		if err := g.Add(ctx, 1); !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("%v: Add: %v, want ErrUnexpectedReply", fields, err)
		}
		if _, err := g.State(ctx); !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("%v: State: %v, want ErrUnexpectedReply", fields, err)
		}
		if ks := keysUnder(t, srv, p); len(ks) != 1 {
			t.Errorf("%v: keys %v, want the foreign hash alone", fields, ks)
		}
		srv.Do(ctx, "DEL", key)
	}
}
