package election

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// noBackend fails every call: the reminder's test makes none.
type noBackend struct{}

func (noBackend) Eval(context.Context, *backend.Script, []string, ...any) (any, error) {
	return nil, errors.New("noBackend")
}
func (noBackend) Subscribe(context.Context, string) (backend.Subscription, error) {
	return nil, errors.New("noBackend")
}
func (noBackend) Close() error { return nil }

// countHandler counts the records at each level.
type countHandler struct{ warn, info *int }

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	switch r.Level {
	case slog.LevelWarn:
		*h.warn++
	case slog.LevelInfo:
		*h.info++
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// A failure to observe that goes on is logged again once remindAfter has
// passed since it was last logged, however many attempts that took, and
// not before.
func TestObserverFailureRemindedAfterAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var warn, info int
		e := New(noBackend{}, "remind", WithLogger(slog.New(countHandler{&warn, &info})))
		f := &feed{e: e}
		refused := &backend.ServerError{Message: "NOPERM this user has no permissions to run the 'set' command"}
		n := 0
		attempt := func(after time.Duration) {
			time.Sleep(after)
			n++
			f.unreachable(n, refused)
		}
		attempt(0)
		for range 5 {
			attempt(remindAfter / 6) // five within the minute: not logged
		}
		if warn != 1 {
			t.Fatalf("%d warnings after %d attempts within %v; want 1", warn, n, remindAfter)
		}
		attempt(remindAfter / 6) // a minute since the first
		if warn != 2 {
			t.Fatalf("%d warnings once %v passed; want 2", warn, remindAfter)
		}
		attempt(10 * time.Minute) // one slow attempt: also a minute since
		if warn != 3 {
			t.Fatalf("%d warnings after an attempt of 10m; want 3", warn)
		}
		f.reached()
		if info != 1 {
			t.Fatalf("%d Info records once reached; want 1", info)
		}
	})
}
