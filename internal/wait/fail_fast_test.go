package wait

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/internal/hub"
)

// failing is an acquisition whose attempts all fail with err.
type failing struct {
	h        *hub.Hub
	err      error
	attempts int
}

func (f *failing) Hub() *hub.Hub                            { return f.h }
func (f *failing) Try(context.Context, Try) (Result, error) { f.attempts++; return Result{}, f.err }
func (f *failing) Granted(int64, time.Time) bool            { return false }
func (f *failing) Abandon(context.Context) error            { return nil }

// A wait rides out a server that refuses connections until its context
// ends; under FailFast it ends at the first failed attempt, with that
// attempt's error.
func TestFailFastEndsTheWaitAtTheFirstBackendError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
		spec := Spec{Channel: "ch", WaiterID: "op", Heartbeat: time.Hour}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		f := &failing{h: hub.New(quiet{}, nil), err: refused}
		if err := Acquire(ctx, spec, f); !errors.Is(err, context.DeadlineExceeded) || f.attempts < 2 {
			t.Fatalf("Acquire = %v after %d attempts; want the deadline, after more than one", err, f.attempts)
		}

		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		f = &failing{h: hub.New(quiet{}, nil), err: refused}
		start := time.Now()
		if err := Acquire(FailFast(ctx), spec, f); !errors.Is(err, refused) || f.attempts != 1 {
			t.Fatalf("Acquire under FailFast = %v after %d attempts; want %v after one", err, f.attempts, refused)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("Acquire under FailFast took %v; want no backoff", took)
		}
	})
}
